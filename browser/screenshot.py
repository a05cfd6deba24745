"""The README's picture of the console (docs/console.png): the live charts
of the first node after a minute of bench load, 1280x900. browser/run.sh
runs it when BASALT_BROWSER_SCREENSHOT names the file to write."""

import os
import sys
import time

from common import Browser, env_nodes, wait_for


def main():
    out = os.environ["BASALT_BROWSER_SCREENSHOT"]
    n1 = env_nodes()[0]
    with Browser("screenshot", width=1280, height=900) as b:
        b.open(n1["http"] + "/console#charts")
        b.wait_view("charts")
        wait_for("a minute of samples", lambda: (b.js("return window.__consoleSamples") or 0) >= 60, secs=120)
        time.sleep(0.5)
        b.driver.save_screenshot(out)
        print("wrote %s (%d bytes)" % (out, os.path.getsize(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
