"""AI_CONTEXT.md on booted sample roots: its exact contents, determinism, and a changed tree."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.kit import booted, make_root, write
from tools.context.reference import ai_context

GREETER_TOOL = '''
    from core import BaseTool

    class Greeter(BaseTool):
        """Says hello."""

        name = "greeter"

        def greet(self, who: str) -> str:
            """A greeting for ``who``."""
            return f"hello {who}"
'''

ORDERS_PLUGIN = '''
    from core import BasePlugin

    PREFIX = "/orders"

    class CreateOrder(BasePlugin):
        """Takes orders."""

        def __init__(self, greeter, http=None, event_bus=None):
            self.greeter = greeter
            self.http = http

        def on_boot(self):
            if self.http is None:
                return
            self.http.add_endpoint("/orders", "post", self.create, request_model=OrderIn, auth=True)
            self.http.add_endpoint(PREFIX + "/{id}", "GET", self.create)
            self.http.add_sse_endpoint("/orders/live", self.create, auth="admin")

        async def create(self, data, context):
            await self.event_bus.publish("order.created", data)

    class Shipping(BasePlugin):
        def __init__(self, missing_tool):
            self.missing_tool = missing_tool

        async def on_boot(self):
            await self.event_bus.subscribe("order.created", self.ship)
'''

ORDER_MODELS = '''
    """Order shapes."""
    from enum import Enum

    from pydantic import BaseModel

    class Status(str, Enum):
        OPEN = "open"
        SHIPPED = "shipped"

    class OrderIn(BaseModel):
        """An order as placed."""

        sku: str
        quantity: int = 1
'''

EXPECTED_PROJECT = """## Domains

### `shop`

**Plugins**

| plugin | file | injects |
|---|---|---|
| `shop.CreateOrder` | `domains/shop/plugins/orders.py` | `greeter`, `http`, `event_bus` |
| `shop.Shipping` | `domains/shop/plugins/orders.py` | `missing_tool` |
| — | `domains/shop/plugins/typo.py` | unreadable: SyntaxError: invalid syntax (line 1) |

**Endpoints**

| method | path | auth | request model | plugin |
|---|---|---|---|---|
| POST | `/orders` | token | `OrderIn` | `shop.CreateOrder` |
| GET (SSE) | `/orders/live` | admin | — | `shop.CreateOrder` |
| GET | `<dynamic>` | none | — | `shop.CreateOrder` |

**Events**

- publishes: `order.created`
- subscribes to: `order.created`

**Models**

- `Status(str, Enum)` in `domains/shop/models/order.py`
  - `OPEN`
  - `SHIPPED`
- `OrderIn(BaseModel)` in `domains/shop/models/order.py` — An order as placed.
  - `sku: str`
  - `quantity: int` (optional)
"""


@pytest.fixture(autouse=True)
def context_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AI_CONTEXT_ENABLED", raising=False)
    monkeypatch.delenv("CONTEXT_FILE", raising=False)


def sample_root(tmp_path: Path, name: str = "root") -> Path:
    root = make_root(tmp_path, tools=("context",), name=name)
    write(root, "tools/greeter/greeter_tool.py", GREETER_TOOL)
    write(root, "domains/shop/plugins/orders.py", ORDERS_PLUGIN)
    write(root, "domains/shop/plugins/typo.py", "def broken(:\n")
    write(root, "domains/shop/models/order.py", ORDER_MODELS)
    return root


async def test_the_file_is_the_brief_make_docs_writes_with_the_tools_and_domains(tmp_path: Path) -> None:
    root = sample_root(tmp_path)
    async with booted(root):
        pass
    text = (root / "AI_CONTEXT.md").read_text(encoding="utf-8")
    assert text == ai_context(root), "booting and `make docs` write the same file"
    assert "- `greeter.greet(who: str) -> str` — A greeting for ``who``." in text
    assert "- `context_manager.regenerate() -> bool`" in text
    assert text.split("# This project\n\n", 1)[1] == EXPECTED_PROJECT
    for run_state in ("READY", "missing required tools", "Not running", "did not load"):
        assert run_state not in text, f"{run_state!r} describes a run, not the tree"


async def test_models_are_stored_as_domain_metadata(tmp_path: Path) -> None:
    async with booted(sample_root(tmp_path)) as kernel:
        models = kernel.registry.get_domain_metadata()["shop"]["models"]
        (order,) = models.values()
        assert list(models) == ["domains/shop/models/order.py"]
        assert [cls["name"] for cls in order["classes"]] == ["Status", "OrderIn"]
        assert order["classes"][1]["fields"][1] == {
            "name": "quantity",
            "annotation": "int",
            "has_default": True,
        }
        assert kernel.registry.get_system_dump()["domains"]["shop"]["models"] == models


async def test_two_boots_of_one_tree_give_the_same_bytes_and_the_second_does_not_rewrite(
    tmp_path: Path,
) -> None:
    root = sample_root(tmp_path)
    async with booted(root):
        pass
    path = root / "AI_CONTEXT.md"
    first = path.read_bytes()
    os.utime(path, (1_000_000, 1_000_000))
    async with booted(root) as kernel:
        assert kernel.container.get("context_manager").regenerate() is False
    assert path.read_bytes() == first
    assert path.stat().st_mtime == 1_000_000
    other = sample_root(tmp_path, name="copy")
    async with booted(other):
        pass
    assert (other / "AI_CONTEXT.md").read_bytes() == first, "the same tree elsewhere renders the same"


async def test_a_plugin_added_between_boots_appears_after_the_next_boot(tmp_path: Path) -> None:
    root = sample_root(tmp_path)
    async with booted(root):
        pass
    assert "/refunds" not in (root / "AI_CONTEXT.md").read_text()
    write(
        root,
        "domains/billing/plugins/refunds.py",
        """
        from core import BasePlugin

        class Refunds(BasePlugin):
            def __init__(self, greeter, http):
                self.greeter = greeter
                self.http = http

            def on_boot(self):
                self.http.add_endpoint("/refunds", "POST", self.refund, auth=True)

            def refund(self, data, context):
                self.event_bus.publish("refund.issued", data)
        """,
    )
    async with booted(root):
        pass
    text = (root / "AI_CONTEXT.md").read_text()
    assert "### `billing`" in text
    assert "| `billing.Refunds` | `domains/billing/plugins/refunds.py` | `greeter`, `http` |" in text
    assert "| POST | `/refunds` | token | — | `billing.Refunds` |" in text
    assert "- publishes: `refund.issued`" in text
    assert text.index("### `billing`") < text.index("### `shop`")


async def test_the_file_is_replaced_atomically_keeping_its_mode(tmp_path: Path) -> None:
    root = sample_root(tmp_path)
    path = root / "AI_CONTEXT.md"
    path.write_text("stale hand edit\n")
    path.chmod(0o640)
    async with booted(root):
        pass
    assert path.read_text() == ai_context(root)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".AI_CONTEXT")) == []


async def test_a_new_file_is_world_readable(tmp_path: Path) -> None:
    root = sample_root(tmp_path)
    async with booted(root):
        pass
    assert stat.S_IMODE((root / "AI_CONTEXT.md").stat().st_mode) == 0o644


async def test_context_file_can_be_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = sample_root(tmp_path)
    monkeypatch.setenv("CONTEXT_FILE", "docs/CONTEXT.md")
    async with booted(root):
        pass
    expected = ai_context(root)
    assert (root / "docs" / "CONTEXT.md").read_text() == expected
    assert not (root / "AI_CONTEXT.md").exists()
    absolute = tmp_path / "elsewhere.md"
    monkeypatch.setenv("CONTEXT_FILE", str(absolute))
    async with booted(root):
        pass
    assert absolute.read_text() == expected


async def test_it_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = sample_root(tmp_path)
    monkeypatch.setenv("AI_CONTEXT_ENABLED", "false")
    async with booted(root) as kernel:
        status = kernel.registry.get_system_dump()["tools"]["context_manager"]
        assert status["status"] == "OFF"
        assert "AI_CONTEXT_ENABLED" in status["message"]
        assert kernel.container.get("context_manager").regenerate() is False
    assert not (root / "AI_CONTEXT.md").exists()


async def test_a_root_without_domains_still_gets_a_file(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("context",))
    (root / "domains").rmdir()
    async with booted(root):
        pass
    text = (root / "AI_CONTEXT.md").read_text()
    assert text.endswith("# This project\n\n## Domains\n\nNo domains.\n")


def test_field_calls_only_count_as_defaults_when_they_give_one(tmp_path: Path) -> None:
    from tools.context.source_scan import scan_model_file

    path = write(
        tmp_path,
        "m.py",
        """
        from dataclasses import dataclass, field
        from pydantic import BaseModel, Field

        class Shapes(BaseModel):
            required: str = Field(min_length=3)
            also_required: str = Field(..., max_length=9)
            given: int = Field(5, ge=0)
            keyword: int = Field(default=1)
            factory: list[int] = Field(default_factory=list)
            plain: bool = False

        @dataclass
        class Record:
            items: list[int] = field(default_factory=list)
            name: str = field(repr=False)
        """,
    )
    (shapes, record) = scan_model_file(path, "m.py").classes
    assert [(f.name, f.has_default) for f in shapes.fields] == [
        ("required", False),
        ("also_required", False),
        ("given", True),
        ("keyword", True),
        ("factory", True),
        ("plain", True),
    ]
    assert [(f.name, f.has_default) for f in record.fields] == [("items", True), ("name", False)]


async def test_tool_statuses_and_messages_stay_out_of_the_file(tmp_path: Path) -> None:
    root = sample_root(tmp_path)
    write(
        root,
        "tools/chatty/chatty_tool.py",
        """
        from core import BaseTool, ToolNotConfiguredError

        class Chatty(BaseTool):
            name = "chatty"

            async def setup(self):
                message = f"{self.project_root}/x.db; 3 applied"
                self.kernel_registry.update_tool_status("chatty", "OK", message)

        class Broken(BaseTool):
            name = "broken"

            async def setup(self):
                raise ToolNotConfiguredError(f"set BROKEN_URL (tried {self.project_root}/data/b.db)")
    """,
    )
    async with booted(root):
        pass
    text = (root / "AI_CONTEXT.md").read_text(encoding="utf-8")
    assert "3 applied" not in text
    assert str(root) not in text
    assert "BROKEN_URL" not in text and "| OFF |" not in text, "a tool's state is the dump's, not the file's"
    assert "| `broken` | — |" in text, "an OFF tool is still documented"
