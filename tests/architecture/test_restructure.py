"""tools/restructure.py, the re-runnable root split (issue 38): what it rewrites, what it keeps, and that the
tree has nothing left for it to do (so a branch merged after it ran shows up here until it is run again)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from import_graph import ROOT  # same folder (pytest prepend import mode)

_spec = importlib.util.spec_from_file_location("restructure", ROOT / "tools" / "restructure.py")
restructure = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(restructure)  # type: ignore[union-attr]


def test_an_import_of_a_moved_module_names_its_new_package() -> None:
    assert restructure.rewrite("from mnemobus.config import Settings\nimport mnemobus.worker as w\n", python=True) \
        == "from mnemobus.shared.config import Settings\nimport mnemobus.kernel.worker as w\n"


def test_names_imported_from_the_root_are_split_by_the_package_each_moved_to() -> None:
    text = "    from mnemobus import extensions, subjects, cli  # why\n"
    assert restructure.rewrite(text, python=True) == ("    from mnemobus.kernel import extensions  # why\n"
                                                       "    from mnemobus.shared import subjects\n"
                                                       "    from mnemobus import cli\n")


def test_paths_in_docs_and_make_files_follow_the_move() -> None:
    text = "see mnemobus/worker.py and [x](../mnemobus/config.py); `python -m mnemobus.neo4j_local`\n"
    assert restructure.rewrite(text, python=False) == ("see mnemobus/kernel/worker.py and [x](../mnemobus/shared/"
                                                       "config.py); `python -m mnemobus.kernel.neo4j_local`\n")


def test_logger_names_and_longer_names_are_kept() -> None:
    text = 'log = logging.getLogger("mnemobus.worker")\nx = "mnemobus.configs"\ny = tests.mnemobus.config\n'
    assert restructure.rewrite(text, python=True) == text


def test_a_moved_module_finds_the_checkout_one_folder_further_up() -> None:
    assert restructure.deeper("ROOT = Path(__file__).resolve().parents[1]\n") == \
        "ROOT = Path(__file__).resolve().parents[2]\n"


def test_rewriting_twice_changes_nothing_the_second_time() -> None:
    text = "from mnemobus import app, errors\nfrom mnemobus.shared.errors import ConfigError\nmnemobus/limits.py\n"
    once = restructure.rewrite(text, python=True)
    assert (once != text, restructure.rewrite(once, python=True)) == (True, once)


def test_the_tree_has_nothing_left_to_move_or_rewrite() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "restructure.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "")
