"""A bounded schemathesis run against the served OpenAPI schema (real uvicorn, real files).

Every operation gets a few generated requests, valid and invalid, with the control token; no
answer may be a 5xx, and each must match its documented status codes, content type and schema.
The endless streams (live updates, looping video) are left out: a fuzzer cannot finish them.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.rundata import make_run

FUZZ_TOKEN = "fuzz-token-0123456789abcdef"
EXAMPLES = 8
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    run_dir = make_run(tmp_path_factory.mktemp("fuzz") / "run", episodes=2, length=12, size=16, metric_rows=30)
    with BackgroundServer(create_app(run_dir, DashboardSettings(token=FUZZ_TOKEN, max_video_fps=240))) as srv:
        yield srv


def _fuzz(operation, mode, base_url: str, failures: list[str]) -> int:
    """The number of generated cases run; a failure that is not a call's (the strategy or
    hypothesis itself failing) is recorded in `failures` too, never swallowed."""
    calls = 0
    recorded = len(failures)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case):
        nonlocal calls
        calls += 1
        try:
            case.call_and_validate(
                base_url=base_url, headers={"Authorization": f"Bearer {FUZZ_TOKEN}"}, timeout=10, checks=CHECKS
            )
        except Exception as e:  # collect every operation's failure, then report them together
            failures.append(f"{operation.label} [{mode.value}]: {str(e)[:600]}")
            raise

    try:
        run()
    except Unsatisfiable:
        # only NEGATIVE mode may find no case: an operation without parameters or body has no invalid input
        if mode != GenerationMode.NEGATIVE or calls:
            failures.append(f"{operation.label} [{mode.value}]: no case could be generated")
    except Exception as e:
        if len(failures) == recorded:  # not a call's failure (those are recorded in run): generation broke
            failures.append(f"{operation.label} [{mode.value}]: generating cases failed: {type(e).__name__}: "
                            f"{str(e)[:600]}")
    return calls


def test_api_conforms_to_its_schema(fuzz_server):
    # schemathesis' pytest plugin does not load under pytest 9, so the operations are driven here
    schema = schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json").exclude(path_regex=r"/stream$|/video/")
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 15
    failures: list[str] = []
    calls: dict[tuple[str, str], int] = {}
    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            calls[op.label, mode.value] = _fuzz(op, mode, fuzz_server.url, failures)
    print(f"fuzz: {sum(calls.values())} calls over {len(operations)} operations")
    assert not failures, "\n\n".join(failures)
    # every operation ran valid cases: one that generated none was not fuzzed at all
    unfuzzed = sorted(label for (label, mode), n in calls.items() if mode == GenerationMode.POSITIVE.value and n < 1)
    assert not unfuzzed, f"operations without a single generated case: {unfuzzed}"
    # and every operation that takes any input was sent invalid ones
    unnegated = sorted(op.label for op in operations
                       if (list(op.iter_parameters()) or op.body)
                       and calls[op.label, GenerationMode.NEGATIVE.value] < 1)
    assert not unnegated, f"operations with inputs but no invalid case: {unnegated}"
