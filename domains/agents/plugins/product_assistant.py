"""The example agent: a ReAct product assistant that looks products up in the database.

It is declared as ``products``: ``POST /agents/products/runs {"input": "Is the walnut keyboard in
stock?"}``. The agent runs on the injected ``llm`` (its ``default_model``, ``LLM_MODEL``) with one
tool, ``find_products``, which searches the ``agent_products`` table (``migrations/agents``) through
the ``db`` tool, so every lookup shows in ``/system/metrics`` as a ``db.query`` call.

The tool only reads, so it is not side-effecting: a run resumed after a restart in the middle of a
lookup simply looks again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core import BasePlugin
from core.agents import Agent, ReActCognition
from core.contracts.errors import ToolArgumentError
from core.contracts.protocols import Ctx
from core.contracts.types import ToolSchema
from core.runs import catalog_for

AGENT_NAME = "products"
SYSTEM = (
    "You are the shop's product assistant. Answer questions about products, prices and stock. "
    "Always look products up with find_products before answering; never invent a product, a price "
    "or a stock level. Prices are in euros."
)
MAX_RESULTS = 10


class FindProducts:
    """``find_products(query)``: products whose name or description contains the query."""

    name = "find_products"
    side_effecting = False
    schema = ToolSchema(
        name,
        "Search the product catalogue by words in the name or description; returns sku, name, "
        "price in euros and units in stock.",
        {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "words to look for, e.g. 'keyboard'"}},
            "required": ["query"],
        },
    )

    def __init__(self, db: Any) -> None:
        self._db = db

    async def run(self, args: Mapping[str, Any], ctx: Ctx) -> list[dict[str, Any]]:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolArgumentError("query must be a non-empty string", tool=self.name, argument="query")
        pattern = f"%{query.strip().lower()}%"
        rows = await self._db.query(
            "SELECT sku, name, price_cents, stock FROM agent_products "
            "WHERE lower(name) LIKE $1 OR lower(description) LIKE $1 ORDER BY name LIMIT $2",
            [pattern, MAX_RESULTS],
        )
        return [
            {"sku": r["sku"], "name": r["name"], "price_eur": r["price_cents"] / 100, "in_stock": r["stock"]}
            for r in rows
        ]


class ProductAssistantPlugin(BasePlugin):
    def __init__(self, llm: Any, db: Any, container: Any) -> None:
        self.llm = llm
        self.db = db
        self.catalog = catalog_for(container)

    async def on_boot(self) -> None:
        agent = Agent(
            AGENT_NAME,
            self.llm.default_model or "default",
            ReActCognition([FindProducts(self.db)], max_iterations=6),
            system=SYSTEM,
        )
        self.catalog.declare(
            agent, llm=self.llm, description="Answers questions about products, prices and stock"
        )

    async def on_shutdown(self) -> None:
        self.catalog.withdraw(AGENT_NAME)
