"""`make lab` in a real browser: every chapter (notebooks/) and every recorded copy (results/*/notebooks/) is
opened in JupyterLab in headless Chromium, its kernel started and idle, saved the way a reader saves (Ctrl-S,
then an autosave interval), and closed; afterwards no file there has changed a byte and `git status` shows
nothing under notebooks/ or results/ (jupyter_server_config.py, .gitattributes).

JupyterLab is started through `make lab` itself (LAB_ARGS: a free localhost port, a token, no browser of its
own) with a 2-second autosave interval and only the cells in view drawn. Needs Chromium and its driver (Debian's
packages `chromium` and `chromium-driver`; .ci/run installs them) and selenium; about two minutes on two cores.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from utils import REPO

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
AUTOSAVE_S = 2

pytestmark = [
    pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
                       reason="no Chromium: install Debian's chromium and chromium-driver (.ci/run does)"),
    pytest.mark.skipif(shutil.which("make") is None, reason="no make"),
]
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a test dependency (pyproject's [test])")
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402 (selenium is there: importorskip above)

NOTEBOOKS = sorted(p.relative_to(REPO).as_posix() for p in [*REPO.glob("notebooks/*.ipynb"),
                                                             *REPO.glob("results/*/notebooks/*.ipynb")])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _shut_down_kernels(base: str, token: str) -> None:
    for session in _get(f"{base}/api/sessions?token={token}"):
        req = urllib.request.Request(f"{base}/api/sessions/{session['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(req, timeout=30).close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab started by `make lab`; yields (base url, token)."""
    tmp = tmp_path_factory.mktemp("lab")
    settings = tmp / "settings" / "@jupyterlab"
    (settings / "docmanager-extension").mkdir(parents=True)
    (settings / "docmanager-extension" / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosaveInterval": AUTOSAVE_S}))
    # Only the cells in view are attached to the page ("full" windowing; the default attaches every cell and
    # hides the ones out of view): the recorded copies' outputs are no longer all drawn on two cores. The
    # notebook's model, its kernel's metadata and what a save writes are the same either way.
    (settings / "notebook-extension").mkdir()
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "full"}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime")}
    args = (f"--ip=127.0.0.1 --port={port} --ServerApp.port_retries=0 --no-browser "
            f"--IdentityProvider.token={token} --LabApp.expose_app_in_browser=True")
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(["make", "-s", "lab", f"PY={sys.executable}", f"LAB_ARGS={args}"], cwd=REPO, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"`make lab` did not serve {base}:\n{(tmp / 'lab.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield base, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # make and the jupyter server it started, nothing else
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_script_timeout(120)
    yield driver
    driver.quit()


# In the page: JupyterLab's application object (expose_app_in_browser) and the document widget of a path.
_STATE = """
const app = window.jupyterapp;
const w = Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === arguments[0]);
const kernel = w && w.sessionContext.session && w.sessionContext.session.kernel;
return w ? {path: w.context.path, ready: w.context.isReady, cells: w.content.widgets.length,
            current: app.shell.currentWidget === w, kernel: kernel ? kernel.status : null,
            dirty: w.context.model.dirty,
            writable: w.context.contentsModel ? w.context.contentsModel.writable : null} : null;"""


# In the page: the document widget of a path brought to the front, as a click on its tab does.
_ACTIVATE = """
const app = window.jupyterapp;
const w = Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === arguments[0]);
app.shell.activateById(w.id);"""


def _wait(driver, path: str, what: str, ok, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = driver.execute_script(_STATE, path)
        if state and ok(state):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: {what} timed out; its state: {state}")
        time.sleep(0.25)


def _dismiss(driver, button: str) -> bool:
    """Click `button` on every open dialog; whether there was one."""
    buttons = driver.find_elements("css selector", f".jp-Dialog .{button}")
    for b in buttons:
        b.click()
    return bool(buttons)


def _snapshot() -> dict[str, bytes]:
    """Every notebook's bytes, and every path under results/ (ignored ones too: no checkpoint folder there)."""
    return {**{p: (REPO / p).read_bytes() for p in NOTEBOOKS},
            "results/**": "\n".join(sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("results/**/*"))).encode()}


def test_there_are_notebooks_and_recorded_copies():
    assert any(p.startswith("notebooks/") for p in NOTEBOOKS)
    assert any(p.startswith("results/") for p in NOTEBOOKS)


def test_opening_and_leaving_every_notebook_changes_nothing(lab, browser):
    """A folder at a time, as a reader opens tabs: every notebook of it opened (as a double-click in the file
    browser does) and its kernel idle, then each tab brought to the front and Ctrl-S pressed; then two autosave
    intervals with all of them open; then every tab closed (discarding, where JupyterLab asks about a read-only
    copy) and the kernels shut down."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    base, token = lab
    before = _snapshot()
    browser.get(f"{base}/lab/tree/notebooks?token={token}")
    WebDriverWait(browser, 120).until(lambda d: d.execute_script("return !!window.jupyterapp"))
    browser.execute_async_script("window.jupyterapp.restored.then(() => arguments[0](true))")
    folders: dict[str, list[str]] = {}
    for path in NOTEBOOKS:
        folders.setdefault(path.rpartition("/")[0], []).append(path)
    seen = {}
    for paths in folders.values():
        for path in paths:  # the folder's tabs opened one after another, their kernels starting side by side
            browser.execute_async_script("const done = arguments[1]; window.jupyterapp.commands"
                                         ".execute('docmanager:open', {path: arguments[0]}).then(() => done(true))",
                                         path)
        for path in paths:
            _wait(browser, path, "opening", lambda s: s["ready"] and s["cells"] > 0)
            _wait(browser, path, "its kernel starting", lambda s: s["kernel"] == "idle")
        for path in paths:  # each tab brought to the front and saved
            browser.execute_script(_ACTIVATE, path)
            _wait(browser, path, "coming to the front", lambda s: s["current"])
            browser.find_element("css selector", ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click()
            ActionChains(browser).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()
            deadline = time.monotonic() + 0.5
            while path.startswith("results/") and time.monotonic() < deadline:
                if _dismiss(browser, "jp-mod-reject"):  # a read-only copy answers Ctrl-S with a dialog: Cancel
                    break
                time.sleep(0.05)
        time.sleep(2 * AUTOSAVE_S + 1)  # every open notebook's autosave timer fires at least once
        for path in paths:
            seen[path] = _wait(browser, path, "settling", lambda s: s["kernel"] == "idle")
        browser.execute_script("window.jupyterapp.commands.execute('application:close-all')")
        deadline = time.monotonic() + 60
        while browser.execute_script("return Array.from(window.jupyterapp.shell.widgets('main'))"
                                     ".filter(w => w.context).length"):
            _dismiss(browser, "jp-mod-warn")  # "Save your work?" for a copy the kernel's metadata changed
            assert time.monotonic() < deadline, "closing every tab timed out"
            time.sleep(0.1)
        _shut_down_kernels(base, token)  # as "Shut Down All Kernels": two cores, one folder at a time
    for path, state in seen.items():
        assert state["writable"] == (not path.startswith("results/")), (path, state)
        if path.startswith("notebooks/"):
            assert not state["dirty"], f"{path}: Ctrl-S left it unsaved: {state}"
    after = _snapshot()
    changed = [p for p in before if before[p] != after[p]]
    assert not changed, f"opening and leaving these in `make lab` changed them: {changed}"
    if (REPO / ".git").exists():
        status = subprocess.run(["git", "status", "--porcelain", "--", "notebooks", "results"], cwd=REPO,
                                capture_output=True, text=True, check=True).stdout
        assert status == "", f"`git status` after opening every notebook in `make lab`:\n{status}"
