"""tests/slow_tests.txt names tests that exist: an entry whose file or test function is gone
(renamed, removed) would silently stop keeping anything out of the default run."""

from __future__ import annotations

import re

from tests.conftest import ROOT, slow_list


def test_every_listed_slow_test_names_a_test_function_of_its_file():
    listed = slow_list()
    assert len(listed) >= 100  # the file was read, and is not a stub
    missing = []
    for nodeid in sorted(listed):
        path, _, rest = nodeid.partition("::")
        name = re.split(r"[\[:]", rest)[0]
        source = ROOT / path
        if not source.is_file() or f"def {name}(" not in source.read_text():
            missing.append(nodeid)
    assert not missing, missing


def test_the_default_run_keeps_a_search_end_to_end():
    listed = slow_list()
    cli = "tests/search/test_search_cli.py::"
    assert (
        cli + "test_search_records_every_evaluation_once_with_parent_links_and_resumes"
        not in listed
    )
    assert cli + "test_sigkill_loses_no_printed_evaluation_and_the_run_resumes" not in listed
