from typing import Any


def register(commands: Any) -> None:
    pass
