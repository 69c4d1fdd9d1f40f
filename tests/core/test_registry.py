"""The registry's questions about files and tools that the reloader and the container ask."""

from __future__ import annotations

from core.registry import Registry, ToolStatus


def test_tool_state_registers_once_and_is_the_live_state() -> None:
    registry = Registry()
    state = registry.tool_state("db")
    assert state.status is ToolStatus.OK
    assert registry.tool_state("db") is state
    registry.update_tool_status("db", ToolStatus.DEAD, "gone")
    assert registry.tool_state("db").status is ToolStatus.DEAD
    assert registry.tool_state("db") is state  # the proxy sees the change without asking again


def test_plugins_in_file_and_files_under_a_folder() -> None:
    registry = Registry()
    for plugin_id, file in (
        ("shop.Cart", "domains/shop/plugins/cart.py"),
        ("shop.Till", "domains/shop/plugins/cart.py"),
        ("shopping.List", "domains/shopping/plugins/list.py"),
        ("lost.Nowhere", None),
    ):
        registry.register_plugin(
            plugin_id, domain=plugin_id.split(".")[0], class_name="C", dependencies=[], file=file
        )
    registry.record_load_error("domains/shop/plugins/broken.py", "SyntaxError")
    assert registry.plugins_in_file("domains/shop/plugins/cart.py") == ["shop.Cart", "shop.Till"]
    assert registry.plugins_in_file("domains/shop/plugins/none.py") == []
    assert registry.has_load_error("domains/shop/plugins/broken.py")
    assert not registry.has_load_error("domains/shop/plugins/cart.py")
    # A folder is a prefix of whole path segments: shopping/ is not under shop/.
    assert registry.files_under("domains/shop") == {
        "domains/shop/plugins/cart.py",
        "domains/shop/plugins/broken.py",
    }
    assert registry.files_under("domains/shop/") == registry.files_under("domains/shop")
