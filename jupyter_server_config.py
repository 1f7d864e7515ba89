"""The Jupyter server configuration `make lab` passes (`--config`): opening a notebook and leaving it leaves
`git status` clean.

- `results/` holds recorded runs: JupyterLab sees every file there as read-only (its autosave skips them) and
  the server refuses to save, rename or delete one, whoever asks. File permissions cannot do this: as root,
  as on a Docker GPU runner, every file is writable. To keep a copy, File > Save Notebook As... elsewhere.
- `notebooks/`: JupyterLab writes the running kernel's Python version into a notebook's metadata
  (`language_info.version`), which would tie the committed notebooks to one Python. A save drops it, and a
  save that changes nothing else leaves the file untouched, so that opening a chapter, starting its kernel
  and pressing Ctrl-S (or waiting for autosave) changes no byte. Outputs the reader makes are saved as usual;
  the nbstripout git filter (.gitattributes, set up by `make lab`) keeps them out of git.

tests/test_lab_browser.py opens every notebook and every recorded copy in headless Chromium through this
configuration and checks that no file changed.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado import web

READ_ONLY = "results"  # the recorded runs: data, never edited in place
STABLE = "notebooks"  # the chapters: saved without the kernel's Python version
MACHINE_KEYS = ("version",)  # language_info keys that depend on the machine the kernel runs on


def _under(path: str, folder: str) -> bool:
    path = path.strip("/")
    return path == folder or path.startswith(folder + "/")


def stable_form(content: dict) -> nbformat.NotebookNode:
    """A notebook as `notebooks/` keeps it: the kernel's machine-dependent language_info left out."""
    nb = nbformat.from_dict(content)
    info = nb.get("metadata", {}).get("language_info", {})
    for key in MACHINE_KEYS:
        info.pop(key, None)
    return nb


class WorkbookContentsManager(AsyncLargeFileManager):
    """Jupyter's default contents manager, with results/ read-only and notebooks/ saved in their stable form."""

    def is_writable(self, path):
        return not _under(path, READ_ONLY) and super().is_writable(path)

    def _refuse(self, path: str, what: str) -> None:
        if _under(path, READ_ONLY):
            raise web.HTTPError(403, f"{path} is a recorded run (results/ is read-only in `make lab`): "
                                     f"not {what}; File > Save Notebook As... keeps a copy elsewhere")

    async def save(self, model, path=""):
        self._refuse(path, "saved")
        if model.get("type") == "notebook" and "content" in model and _under(path, STABLE):
            nb = stable_form(model["content"])
            model = {**model, "content": nb}
            os_path = Path(self._get_os_path(path))
            if os_path.is_file():
                on_disk = nbformat.reads(os_path.read_text(encoding="utf-8"), as_version=nbformat.NO_CONVERT)
                if nbformat.writes(on_disk) == nbformat.writes(nb):  # nothing but the machine's metadata changed:
                    return await self.get(path, content=False, type="notebook")  # the file stays as it is
        return await super().save(model, path)

    async def rename_file(self, old_path, new_path):
        self._refuse(old_path, "renamed")
        self._refuse(new_path, "written")
        return await super().rename_file(old_path, new_path)

    async def delete_file(self, path):
        self._refuse(path, "deleted")
        return await super().delete_file(path)

    async def create_checkpoint(self, path):
        self._refuse(path, "checkpointed")
        return await super().create_checkpoint(path)

    async def list_checkpoints(self, path):
        if _under(path, READ_ONLY):  # none, and no .ipynb_checkpoints/ folder made in results/ to say so
            return []
        return await super().list_checkpoints(path)


c = get_config()  # noqa: F821 (Jupyter defines it while it reads this file)
c.ServerApp.contents_manager_class = WorkbookContentsManager
