"""Shared set-up of the browser tests (browser/run.sh runs them).

Debian's chromium, driven headless through Debian's chromedriver with
Selenium. Each test file imports this module:

    from common import Browser, env_nodes
    with Browser("my-test") as b:
        b.open(env_nodes()[0]["http"] + "/console#cluster")
        b.wait_view("cluster")
        b.shot("cluster")
        b.assert_no_console_errors()

The environment (set by browser/run.sh): BASALT_BROWSER_NODES is a JSON
list of the cluster's nodes ({"name", "http", "cluster", "pb"}, plus the
spare node BASALT_BROWSER_SPARE the join test adds), BASALT_BROWSER_ARTIFACTS
the directory screenshots go to, BASALT_BIN the basalt binary,
CHROMIUM / CHROMEDRIVER the binaries (defaults /usr/bin/chromium,
/usr/bin/chromedriver).
"""

import json
import os
import shutil
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.common.desired_capabilities import DesiredCapabilities

# Seconds a wait for the page gives up after.
WAIT_SECS = float(os.environ.get("BASALT_BROWSER_WAIT", "20"))


def env_nodes():
    """The cluster's nodes (name, http, cluster, pb addresses)."""
    return json.loads(os.environ["BASALT_BROWSER_NODES"])


def env_spare():
    """The node outside the cluster the join test adds, or None."""
    v = os.environ.get("BASALT_BROWSER_SPARE")
    return json.loads(v) if v else None


def restart(node):
    """Stops `node` (SIGTERM), waits for it to exit, and starts it again
    with the same command line; its new pid goes to BASALT_BROWSER_PIDS
    (browser/run.sh kills it at the end). Returns the new pid."""
    import signal
    import subprocess
    pid = node["pid"]
    os.kill(pid, signal.SIGTERM)
    wait_for("node %s to stop" % node["name"], lambda: not os.path.exists("/proc/%d" % pid)
             or open("/proc/%d/stat" % pid).read().split()[2] == "Z", secs=30)
    log = open(node["log"], "ab")
    p = subprocess.Popen(node["argv"], stdout=log, stderr=log)
    with open(os.environ["BASALT_BROWSER_PIDS"], "a") as f:
        f.write("%d\n" % p.pid)
    node["pid"] = p.pid
    return p.pid


def artifacts():
    d = os.environ.get("BASALT_BROWSER_ARTIFACTS", "/tmp/basalt-browser-artifacts")
    os.makedirs(d, exist_ok=True)
    return d


def wait_for(what, fn, secs=WAIT_SECS, every=0.2):
    """Calls fn until it returns something true; fails after secs."""
    deadline = time.time() + secs
    last = None
    while time.time() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # the page may still be loading
            last = e
        time.sleep(every)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


class Browser(object):
    """A headless chromium with its console log kept."""

    def __init__(self, name, width=1400, height=1000):
        self.name = name
        self.profile = "/tmp/basalt-browser-profile-%d-%s" % (os.getpid(), name)
        opts = Options()
        opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=%d,%d" % (width, height), "--disable-extensions",
                  "--user-data-dir=" + self.profile):
            opts.add_argument(a)
        caps = DesiredCapabilities.CHROME.copy()
        caps["goog:loggingPrefs"] = {"browser": "ALL"}
        self.driver = webdriver.Chrome(
            executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"),
            options=opts, desired_capabilities=caps)
        self.driver.set_page_load_timeout(WAIT_SECS)
        self.errors = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            if exc[0] is not None:
                self.shot("failure")
        finally:
            self.driver.quit()
            shutil.rmtree(self.profile, ignore_errors=True)
        return False

    def open(self, url):
        self.driver.get(url)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def wait_view(self, view):
        """Waits until the console shows `view` with its data loaded."""
        wait_for("view %s loaded" % view,
                 lambda: self.js("return document.body.dataset.loaded") == view)

    def shot(self, label):
        path = os.path.join(artifacts(), "%s-%s.png" % (self.name, label))
        self.driver.save_screenshot(path)
        return path

    def console_log(self):
        """The browser's console entries since the last call."""
        entries = self.driver.get_log("browser")
        self.errors.extend(e for e in entries if e.get("level") == "SEVERE")
        return entries

    def assert_no_console_errors(self, allow=()):
        """Fails on a SEVERE console entry (a script error, a failed
        request), except those whose message contains one of `allow`."""
        self.console_log()
        bad = [e for e in self.errors if not any(a in e.get("message", "") for a in allow)]
        self.errors = []
        assert not bad, "console errors: %s" % json.dumps(bad, indent=1)

    def answers(self):
        """The texts of the console's answer log, newest first."""
        return self.js("return Array.from(document.querySelectorAll('#answer-log li')).map(l => l.className + ' ' + l.textContent)")

    def accept_confirm(self):
        """Accepts the confirmation the console asks before an action."""
        alert = wait_for("a confirmation", lambda: self.driver.switch_to.alert, secs=5)
        text = alert.text
        alert.accept()
        return text


def check(name, fn, results):
    """Runs one check, recording (name, ok, error)."""
    t = time.time()
    try:
        fn()
        results.append((name, True, ""))
        print("PASS %s (%.1f s)" % (name, time.time() - t), flush=True)
    except Exception as e:
        results.append((name, False, repr(e)))
        print("FAIL %s (%.1f s): %s" % (name, time.time() - t, e), flush=True)


def finish(results):
    """Prints the tally; the exit status for the test file."""
    failed = [r for r in results if not r[1]]
    print("%d passed, %d failed" % (len(results) - len(failed), len(failed)), flush=True)
    return 1 if failed else 0
