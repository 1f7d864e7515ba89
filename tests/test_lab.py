"""`make lab`: the interpreter PY names, the whole checkout served (results/ included) and opened at
notebooks/, --allow-root only as root; the README says so and documents WORKBOOK_MODE."""
import os
import shutil
import subprocess

import pytest

from utils import REPO


def _lab_commands(*args: str) -> str:
    return subprocess.run(["make", "-n", "-s", "lab", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_lab_runs_jupyter_through_PY():
    out = _lab_commands("PY=python3")
    assert "python3 -m jupyter lab" in out
    assert "venv" not in out  # no venv set up, no .venv/bin/jupyter
    # the checkout's root (make's CURDIR, the folder PYTHONPATH starts with), not notebooks/
    root = out.split('PYTHONPATH="', 1)[1].split("$", 1)[0]
    assert os.path.samefile(root, REPO)
    assert f'--ServerApp.root_dir="{root}"' in out and "--LabApp.default_url=/lab/tree/notebooks" in out
    assert ("--allow-root" in out) == (os.geteuid() == 0)


def test_readme_describes_make_lab_and_workbook_mode():
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`make lab` (JupyterLab, run as `$(PY) -m jupyter lab`" in readme
    assert "`--allow-root`" in readme and "`results/<device>/` are in the same file browser" in readme
    assert "`WORKBOOK_MODE`" in readme
    assert "state_dict, strict=True" not in readme


def test_make_lab_passes_LAB_ARGS_through():
    out = _lab_commands("PY=python3", "LAB_ARGS=--port 8899 --ip 0.0.0.0 --no-browser")
    jupyter = out[out.index("-m jupyter lab"):]
    assert jupyter.rstrip().endswith("--port 8899 --ip 0.0.0.0 --no-browser"), jupyter
    assert f'--config="{REPO}/jupyter_server_config.py"' in jupyter


def test_make_lab_sets_up_nbstripout_as_the_notebooks_git_filter():
    out = _lab_commands("PY=python3")
    setup = out[:out.index("-m jupyter lab")]
    assert "python3 -m nbstripout --install --attributes .gitattributes" in setup
    assert "-m nbstripout --keep-id" in setup  # cell ids stay as committed
    assert "filter.nbstripout.extrakeys metadata.language_info.version" in setup
    if shutil.which("git") and (REPO / ".git").exists():
        chapter, recorded = "notebooks/00_setup.ipynb", "results/nvidia-h100-80gb-hbm3/notebooks/00_setup.ipynb"
        attrs = subprocess.run(["git", "check-attr", "filter", chapter, recorded], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout
        assert attrs == f"{chapter}: filter: nbstripout\n{recorded}: filter: unspecified\n"  # copies keep outputs


# --------------------------------------------------------------------------- jupyter_server_config.py

def _contents_manager(root):
    pytest.importorskip("jupyter_server")
    import runpy

    from traitlets.config import Config

    config = runpy.run_path(str(REPO / "jupyter_server_config.py"), init_globals={"get_config": Config})
    return config["WorkbookContentsManager"](root_dir=str(root))


def _notebook(source: str = "print(1)"):
    import nbformat

    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(source, id="a1")]
    return nb


@pytest.fixture
def checkout(tmp_path):
    import nbformat

    for folder in ("notebooks", "results/gpu/notebooks"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "n.ipynb").write_text(nbformat.writes(_notebook()) + "\n")
    return tmp_path


def test_recorded_copies_are_read_only_even_for_root(checkout):
    import asyncio

    from tornado.web import HTTPError

    cm = _contents_manager(checkout)
    path = "results/gpu/notebooks/n.ipynb"
    before = (checkout / path).read_bytes()

    async def go():
        model = await cm.get(path)
        assert model["writable"] is False  # JupyterLab's autosave skips it
        assert (await cm.get("notebooks/n.ipynb"))["writable"] is True
        assert (await cm.get("results/gpu"))["writable"] is False
        assert await cm.list_checkpoints(path) == []
        for attempt in (cm.save(model, path), cm.delete_file(path), cm.rename_file(path, "x.ipynb"),
                        cm.create_checkpoint(path),
                        cm.rename_file("notebooks/n.ipynb", "results/gpu/m.ipynb")):
            with pytest.raises(HTTPError) as refused:
                await attempt
            assert refused.value.status_code == 403 and "read-only" in refused.value.log_message

    asyncio.run(go())
    assert (checkout / path).read_bytes() == before
    assert sorted(p.name for p in (checkout / "results").rglob("*")) == ["gpu", "n.ipynb", "notebooks"]


def test_a_chapter_saved_with_the_kernels_python_version_is_left_as_committed(checkout):
    import asyncio

    import nbformat

    cm = _contents_manager(checkout)
    path = "notebooks/n.ipynb"
    file = checkout / path
    before, mtime = file.read_bytes(), file.stat().st_mtime_ns

    async def save(nb):
        return await cm.save({"type": "notebook", "content": nb}, path)

    opened = _notebook()
    opened.metadata.language_info["version"] = "3.11.7"  # what JupyterLab writes from the kernel's reply
    asyncio.run(save(opened))
    assert file.read_bytes() == before and file.stat().st_mtime_ns == mtime  # not even touched
    edited = _notebook("print(2)")
    edited.metadata.language_info["version"] = "3.11.7"
    asyncio.run(save(edited))
    saved = nbformat.read(file, as_version=4)
    assert saved.cells[0].source == "print(2)" and saved.metadata.language_info == {"name": "python"}
