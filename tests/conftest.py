"""pytest set-up shared by every Python test: the options CTest passes (tests/CMakeLists.txt,
tt_add_pytest) and fixtures built from them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/testlib.py for every test file


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--build-dir", type=Path, help="the CMake build tree under test")


@pytest.fixture(scope="session")
def build_dir(request: pytest.FixtureRequest) -> Path:
    path = request.config.getoption("--build-dir")
    if path is None:
        pytest.fail("--build-dir is required (CTest passes it; see tests/CMakeLists.txt)")
    return path.resolve()



# A run whose every test was skipped exits SKIPPED (tt_add_pytest: SKIP_RETURN_CODE), so CTest
# shows "Not Run" instead of "Passed" for a test that could not run here.
SKIPPED = 77


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter is not None else {}
    if exitstatus == 0 and stats.get("skipped") and not stats.get("passed"):
        session.exitstatus = SKIPPED
