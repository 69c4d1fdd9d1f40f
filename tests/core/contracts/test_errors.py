"""Behaviour of core.contracts.errors: the error tree, classify, Failure and compose_failures."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle

import pytest

from core.contracts.errors import (
    ErrorClass,
    Failure,
    KeelError,
    StoreUnavailable,
    StoreValueError,
    ToolArgumentError,
    classify,
    compose_failures,
    require_integer_amount,
)

# --- the error tree ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "expected_branch"),
    [
        (StoreUnavailable("redis down"), "unavailable"),
        (StoreValueError.not_a_counter("k"), "keel"),
        (KeelError("anything else"), "keel"),
    ],
)
def test_the_documented_boundary_catches_store_outages_first_then_every_keel_error(
    raised: Exception, expected_branch: str
) -> None:
    branch = ""
    try:
        raise raised
    except StoreUnavailable:
        branch = "unavailable"  # the store could not be reached — degrade, or fail the run
    except KeelError:
        branch = "keel"  # anything else the framework raised, typed
    assert branch == expected_branch


def test_store_errors_are_keel_errors_and_tool_argument_errors_deliberately_are_not() -> None:
    assert issubclass(StoreUnavailable, KeelError)
    assert issubclass(StoreValueError, KeelError)
    assert issubclass(ToolArgumentError, ValueError)
    assert not issubclass(ToolArgumentError, KeelError)


def test_tool_argument_error_is_caught_where_value_error_is_and_names_what_was_wrong() -> None:
    with pytest.raises(ValueError, match="q must be a string") as info:
        raise ToolArgumentError("q must be a string", tool="search", argument="q")
    assert isinstance(info.value, ToolArgumentError)
    assert info.value.tool == "search"
    assert info.value.argument == "q"


# --- StoreValueError: one message on every backend -----------------------------------------------


class _CounterStore:
    """The smallest increment a backend could write with the shared helpers."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {}

    async def increment(self, key: str, by: object = 1) -> int:
        amount = require_integer_amount(key, by)
        current = self.values.get(key, 0)
        if isinstance(current, bool) or not isinstance(current, int):
            raise StoreValueError.not_a_counter(key)
        self.values[key] = current + amount
        return current + amount


async def test_increment_on_a_key_holding_a_document_raises_store_value_error() -> None:
    store = _CounterStore()
    store.values["ratelimit:user-7"] = {"doc": True}
    with pytest.raises(StoreValueError) as info:
        await store.increment("ratelimit:user-7", 1)
    assert str(info.value) == "cannot increment 'ratelimit:user-7': it holds a value that is not an integer"
    assert info.value.key == "ratelimit:user-7"
    assert info.value.amount is None


@pytest.mark.parametrize("amount", [1.5, 2.0, True, "1", None])
def test_a_non_int_amount_is_refused_with_the_same_text_whatever_the_backend(amount: object) -> None:
    with pytest.raises(StoreValueError) as info:
        require_integer_amount("hits", amount)
    assert str(info.value) == f"cannot increment 'hits' by {amount!r}: the amount must be an int"
    assert info.value.amount is amount
    assert str(info.value) == str(StoreValueError.bad_amount("hits", amount))


@pytest.mark.parametrize("amount", [0, 1, -3, 10**30])
def test_an_int_amount_passes_through(amount: int) -> None:
    assert require_integer_amount("hits", amount) == amount


# --- classify ------------------------------------------------------------------------------------


class _HTTPError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class _AioHTTPStyleError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class _Response:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code


class _HTTPXStyleError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.response = _Response(status_code)


class _DeclaredTransient(Exception):
    error_class = ErrorClass.TRANSIENT


class _DeclaredAsString(ValueError):
    error_class = "permanent"


class _DeclaredNonsense(TimeoutError):
    error_class = "maybe"


class _DeclaredBeatsStatus(Exception):
    status_code = 500
    error_class = ErrorClass.PERMANENT


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (TimeoutError("slow"), ErrorClass.TRANSIENT),
        (asyncio.TimeoutError(), ErrorClass.TRANSIENT),  # noqa: UP041 - the alias is part of the contract
        (ConnectionError("reset"), ErrorClass.TRANSIENT),
        (ConnectionResetError(), ErrorClass.TRANSIENT),
        (BrokenPipeError(), ErrorClass.TRANSIENT),
        (StoreUnavailable("down"), ErrorClass.TRANSIENT),
        (_HTTPError(429), ErrorClass.TRANSIENT),
        (_HTTPError(408), ErrorClass.TRANSIENT),
        (_HTTPError(500), ErrorClass.TRANSIENT),
        (_HTTPError(502), ErrorClass.TRANSIENT),
        (_HTTPError(503), ErrorClass.TRANSIENT),
        (_HTTPError(599), ErrorClass.TRANSIENT),
        (_HTTPError(400), ErrorClass.PERMANENT),
        (_HTTPError(401), ErrorClass.PERMANENT),
        (_HTTPError(403), ErrorClass.PERMANENT),
        (_HTTPError(404), ErrorClass.PERMANENT),
        (_HTTPError(422), ErrorClass.PERMANENT),
        (_HTTPError(302), ErrorClass.UNKNOWN),
        (_AioHTTPStyleError(503), ErrorClass.TRANSIENT),
        (_AioHTTPStyleError(401), ErrorClass.PERMANENT),
        (_HTTPXStyleError(429), ErrorClass.TRANSIENT),
        (_HTTPXStyleError(404), ErrorClass.PERMANENT),
        (StoreValueError.not_a_counter("k"), ErrorClass.PERMANENT),
        (ToolArgumentError("bad"), ErrorClass.PERMANENT),
        (ValueError("bad"), ErrorClass.UNKNOWN),
        (TypeError("bad"), ErrorClass.UNKNOWN),
        (KeyError("k"), ErrorClass.UNKNOWN),
        (RuntimeError("?"), ErrorClass.UNKNOWN),
        (KeelError("?"), ErrorClass.UNKNOWN),
        (asyncio.CancelledError(), ErrorClass.UNKNOWN),
        (_DeclaredTransient(), ErrorClass.TRANSIENT),
        (_DeclaredAsString(), ErrorClass.PERMANENT),
        (_DeclaredNonsense(), ErrorClass.TRANSIENT),
        (_DeclaredBeatsStatus(), ErrorClass.PERMANENT),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_classify_table(exc: BaseException, expected: ErrorClass) -> None:
    assert classify(exc) is expected


def test_a_status_that_is_not_an_error_leaves_the_other_rules_to_decide() -> None:
    class TimedOutAfterRedirect(TimeoutError):
        status_code = 302

    assert classify(TimedOutAfterRedirect()) is ErrorClass.TRANSIENT


def test_classify_reads_status_attributes_that_are_real_http_statuses_only() -> None:
    class StatusIsText(Exception):
        status = "failed"

    class StatusIsBool(Exception):
        status_code = True

    assert classify(StatusIsText()) is ErrorClass.UNKNOWN
    assert classify(StatusIsBool()) is ErrorClass.UNKNOWN


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        ([TimeoutError(), ConnectionError()], ErrorClass.TRANSIENT),
        ([TimeoutError(), ValueError()], ErrorClass.UNKNOWN),
        ([TimeoutError(), _HTTPError(401)], ErrorClass.PERMANENT),
        ([ValueError(), _HTTPError(401)], ErrorClass.PERMANENT),
        ([ExceptionGroup("inner", [TimeoutError()]), ConnectionError()], ErrorClass.TRANSIENT),
    ],
)
def test_an_exception_group_is_classified_by_its_members(
    members: list[Exception], expected: ErrorClass
) -> None:
    assert classify(ExceptionGroup("fan-out", members)) is expected


def test_error_class_is_a_str_enum_with_the_three_verdicts() -> None:
    assert [member.value for member in ErrorClass] == ["transient", "permanent", "unknown"]
    assert str(ErrorClass.TRANSIENT) == "transient"
    assert ErrorClass("unknown") is ErrorClass.UNKNOWN


# --- Failure -------------------------------------------------------------------------------------


def test_failure_from_exception_takes_its_category_from_classify() -> None:
    cause = TimeoutError("slow")
    failure = Failure.from_exception(cause, source="slot[2]", partial_output=["row 1"])
    assert failure.category is ErrorClass.TRANSIENT
    assert failure.source == "slot[2]"
    assert failure.cause is cause
    assert failure.partial_output == ["row 1"]
    assert failure.children == ()


def test_failure_is_frozen_hashable_whatever_it_carries_and_compares_everything() -> None:
    cause = ValueError("x")
    failure = Failure.from_exception(cause, source="a", partial_output={"half": [1, 2]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        failure.source = "b"  # type: ignore[misc]
    assert {failure} == {failure}
    twin = Failure.from_exception(cause, source="a", partial_output={"half": [1, 2]})
    assert twin == failure and hash(twin) == hash(failure)
    assert Failure.from_exception(cause, source="a", partial_output={"half": [1]}) != failure


def test_failure_coerces_category_text_and_children_lists() -> None:
    child = Failure(category=ErrorClass.UNKNOWN, source="c")
    failure = Failure(category="transient", source="s", children=[child])  # type: ignore[arg-type]
    assert failure.category is ErrorClass.TRANSIENT
    assert failure.children == (child,)
    with pytest.raises(ValueError):
        Failure(category="sometimes", source="s")  # type: ignore[arg-type]


def test_failure_survives_pickle() -> None:
    failure = Failure.from_exception(ConnectionError("reset"), source="slot[0]")
    restored = pickle.loads(pickle.dumps(failure))
    assert restored.category is ErrorClass.TRANSIENT
    assert restored.source == "slot[0]"
    assert isinstance(restored.cause, ConnectionError)


# --- compose_failures ----------------------------------------------------------------------------


def test_compose_failures_of_nothing_is_none() -> None:
    assert compose_failures() is None
    assert compose_failures(None, None) is None
    assert compose_failures([]) is None
    assert compose_failures(["a result", 42, None]) is None


def test_compose_failures_returns_a_single_failure_unchanged() -> None:
    only = Failure.from_exception(TimeoutError(), source="slot[1]")
    assert compose_failures(only) is only
    assert compose_failures(None, [only], []) is only


def test_compose_failures_picks_failures_out_of_best_effort_slots_in_order() -> None:
    first = Failure.from_exception(TimeoutError("t"), source="slot[1]")
    second = Failure.from_exception(ConnectionError("c"), source="slot[3]")
    composite = compose_failures(["ok", first, "ok", second], source="fan-out")
    assert composite is not None
    assert composite.children == (first, second)
    assert composite.source == "fan-out"
    assert composite.category is ErrorClass.TRANSIENT
    assert isinstance(composite.cause, ExceptionGroup)
    assert list(composite.cause.exceptions) == [first.cause, second.cause]


@pytest.mark.parametrize(
    ("categories", "expected"),
    [
        ([ErrorClass.TRANSIENT, ErrorClass.TRANSIENT], ErrorClass.TRANSIENT),
        ([ErrorClass.TRANSIENT, ErrorClass.UNKNOWN], ErrorClass.UNKNOWN),
        ([ErrorClass.UNKNOWN, ErrorClass.PERMANENT, ErrorClass.TRANSIENT], ErrorClass.PERMANENT),
    ],
)
def test_a_composite_is_transient_only_when_every_child_is(
    categories: list[ErrorClass], expected: ErrorClass
) -> None:
    children = [Failure(category=category, source=str(i)) for i, category in enumerate(categories)]
    composite = compose_failures(*children)
    assert composite is not None
    assert composite.category is expected


def test_a_composite_without_causes_has_no_cause_and_one_with_causes_can_be_raised() -> None:
    quiet = compose_failures(Failure(ErrorClass.PERMANENT, "a"), Failure(ErrorClass.PERMANENT, "b"))
    assert quiet is not None and quiet.cause is None

    loud = compose_failures(
        Failure.from_exception(TimeoutError("t"), source="a"), Failure(ErrorClass.PERMANENT, "b")
    )
    assert loud is not None and loud.cause is not None
    with pytest.raises(ExceptionGroup) as info:
        raise loud.cause
    assert [type(exc) for exc in info.value.exceptions] == [TimeoutError]


def test_compose_failures_refuses_things_that_are_neither_failures_nor_collections() -> None:
    with pytest.raises(TypeError):
        compose_failures(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compose_failures("slot[0] failed")
