"""pytest set-up shared by every Python test: the options CTest passes (tests/CMakeLists.txt,
tt_add_pytest) and fixtures built from them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/testlib.py for every test file


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--build-dir", type=Path, help="the CMake build tree under test")
    parser.addoption("--lib", type=Path, default=None,
                     help="the libtraintime.so under test (default: the build tree's lib/; tests/wheel "
                          "gives the wheel's)")


@pytest.fixture(scope="session")
def build_dir(request: pytest.FixtureRequest) -> Path:
    path = request.config.getoption("--build-dir")
    if path is None:
        pytest.fail("--build-dir is required (CTest passes it; see tests/CMakeLists.txt)")
    return path.resolve()



# Exit status of a session in which every test that ran was skipped: tt_add_pytest gives CTest
# SKIP_RETURN_CODE 77, so a skipped test shows as "Not Run", never as "Passed".
SKIPPED_EXIT = 77
_outcomes: dict[str, int] = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0 and _outcomes["skipped"] > 0 and _outcomes["passed"] == 0:
        session.exitstatus = SKIPPED_EXIT
