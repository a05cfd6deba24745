"""The web console in a real browser (headless chromium), against the live
cluster browser/run.sh started under bench load:

1. every view of the console renders with no console errors (a
   screenshot of each);
2. the live charts move: the samples' ops/s differ between two readings
   and the chart is drawn;
3. join, plan, commit done through the console (the spare node's console
   stages the join, the claimant's shows the plan and commits) change
   the ring: the spare node becomes a valid member owning partitions;
4. a bucket type created and activated in the console is usable by a
   client (an HTTP PUT and GET through it);
5. a refused action (a leave of a node that is no member) shows the
   node's reason in the answer log and changes nothing;
6. the bench reports under bench_results_dir are listed and open;
7. the live stream of a node that restarts reconnects by itself: the
   page's samples go on after the restart and an action works (the page
   reads the new session token).

Prints PASS/FAIL per check; exits non-zero if any failed.
"""

import json
import sys
import time
import urllib.request

from common import Browser, check, env_nodes, env_spare, finish, restart, wait_for

VIEWS = ["cluster", "node", "charts", "aae", "repl", "types", "security", "reports"]


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read().decode())


def http(method, url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main():
    nodes = env_nodes()
    spare = env_spare()
    n1 = nodes[0]
    results = []

    with Browser("console") as b:
        def every_view_renders():
            b.open(n1["http"] + "/console#cluster")
            for v in VIEWS:
                b.js("location.hash = arguments[0]", v)
                b.wait_view(v)
                if v == "charts":
                    wait_for("samples", lambda: (b.js("return window.__consoleSamples") or 0) >= 3)
                    time.sleep(1.2)
                b.shot(v)
            # The cluster view lists every member with its status; the ring
            # picture has one arc per partition.
            b.js("location.hash = 'cluster'")
            b.wait_view("cluster")
            rows = b.js("return Array.from(document.querySelectorAll('#members tbody tr')).map(r => r.dataset.node)")
            for n in nodes:
                assert n["name"] in rows, (n["name"], rows)
            arcs = b.js("return document.querySelectorAll('#ring-svg path').length")
            ring = get_json(n1["http"] + "/console/api/cluster")
            assert arcs >= len(ring["owners"]) > 0, (arcs, len(ring["owners"]))
            b.assert_no_console_errors()

        def charts_move():
            b.js("location.hash = 'charts'")
            b.wait_view("charts")
            # Two readings of the newest sample's rates, seconds apart.
            first = wait_for("a sample with load", lambda: b.js(
                "const s = window.__consoleLast; return s && (s.ops.get.rate + s.ops.put.rate) > 0 ? s : null"))
            time.sleep(2.5)
            second = b.js("return window.__consoleLast")
            assert second["t"] > first["t"], (first["t"], second["t"])
            a = [first["ops"][o]["rate"] for o in ("get", "put")]
            c = [second["ops"][o]["rate"] for o in ("get", "put")]
            assert a != c, "ops/s did not change between two samples: %r %r" % (a, c)
            # The chart holds the samples (uPlot drew its canvas).
            canvases = b.js("return document.querySelectorAll('#chart-ops canvas').length")
            assert canvases >= 1
            b.shot("charts-moving")
            b.assert_no_console_errors()

        def join_plan_commit():
            assert spare, "no spare node"
            before = get_json(n1["http"] + "/console/api/cluster")
            assert spare["name"] not in [m["node"] for m in before["members"]["members"]]
            # On the spare node's console: stage its join to the cluster.
            b.open(spare["http"] + "/console#cluster")
            b.wait_view("cluster")
            b.driver.find_element_by_css_selector("#form-join input[name=addr]").send_keys(n1["cluster"])
            b.driver.find_element_by_css_selector("#form-join button").click()
            b.accept_confirm()
            wait_for("the join answer", lambda: any("staged join" in a for a in b.answers()))
            # On the claimant's console: show the plan, then commit.
            b.open(n1["http"] + "/console#cluster")
            b.wait_view("cluster")
            b.driver.find_element_by_id("btn-plan").click()
            wait_for("the plan", lambda: any("plan:" in a and spare["name"] in a for a in b.answers()))
            b.shot("plan")
            b.driver.find_element_by_id("btn-commit").click()
            b.accept_confirm()
            wait_for("the commit answer", lambda: any("commit:" in a and a.startswith("ok") for a in b.answers()))
            # The ring changes: the spare node becomes a member and owns partitions.
            def owns():
                v = get_json(n1["http"] + "/console/api/cluster")
                return spare["name"] in v["owners"] or spare["name"] in v["next"].values()
            wait_for("the new member in the ring", owns, secs=60)
            b.js("location.hash = 'node'")
            b.js("location.hash = 'cluster'")
            b.wait_view("cluster")
            wait_for("the new member listed", lambda: spare["name"] in b.js(
                "return Array.from(document.querySelectorAll('#members tbody tr')).map(r => r.dataset.node)"))
            b.shot("after-commit")
            b.assert_no_console_errors()

        def bucket_type_usable():
            name = "browser_t%d" % int(time.time())
            b.open(n1["http"] + "/console#types")
            b.wait_view("types")
            f = b.driver.find_element_by_css_selector("#form-type-create input[name=name]")
            f.send_keys(name)
            props = b.driver.find_element_by_css_selector("#form-type-create input[name=props]")
            props.clear()
            props.send_keys('{"n_val": 2, "allow_mult": false}')
            b.driver.find_element_by_css_selector("#form-type-create button").click()
            b.accept_confirm()  # create
            b.accept_confirm()  # activate
            wait_for("the activation answer", lambda: any("type-activate: %s has been activated" % name in a for a in b.answers()))
            wait_for("the type listed active", lambda: b.js(
                "const r = document.querySelector('#types tr[data-type=\"' + arguments[0] + '\"]'); return r && r.textContent.indexOf('active') >= 0", name))
            b.shot("type-created")
            # A client uses it, through another node once the type spread.
            other = nodes[1]["http"]
            url = "%s/types/%s/buckets/b/keys/k" % (other, name)
            status = wait_for("the type on another node", lambda: http(
                "PUT", url, b"from the console's type", {"Content-Type": "text/plain"})[0] in (200, 204), secs=30)
            assert status
            code, body = http("GET", "%s/types/%s/buckets/b/keys/k" % (n1["http"], name))
            assert code == 200 and body == b"from the console's type", (code, body)
            b.assert_no_console_errors()

        def refused_action_shows_reason():
            b.open(n1["http"] + "/console#cluster")
            b.wait_view("cluster")
            b.driver.find_element_by_css_selector("#form-leave input[name=node]").send_keys("ghost@nowhere")
            b.driver.find_element_by_css_selector("#form-leave button").click()
            b.accept_confirm()
            wait_for("the refusal", lambda: any("leave refused" in a and "not a member" in a for a in b.answers()))
            plan = get_json(n1["http"] + "/console/api/cluster")["plan"]
            assert not plan.get("staged"), plan
            b.shot("refused")
            # A refused action answers 409: the browser logs that failed
            # request; nothing else may be in the log.
            b.assert_no_console_errors(allow=("409",))

        def reports_listed():
            b.open(n1["http"] + "/console#reports")
            b.wait_view("reports")
            links = b.js("return Array.from(document.querySelectorAll('#report-list a')).map(a => a.getAttribute('href'))")
            assert "/console/reports/run-1/report.html" in links, links
            code, body = http("GET", n1["http"] + "/console/reports/run-1/report.html")
            assert code == 200 and b"browser test report" in body, (code, body[:80])
            code, _ = http("GET", n1["http"] + "/console/reports/..%2F..%2Fetc%2Fpasswd")
            assert code == 404, code
            b.shot("reports")
            b.assert_no_console_errors()

        def stream_reconnects_after_restart():
            node = nodes[2]
            b.open(node["http"] + "/console#charts")
            b.wait_view("charts")
            wait_for("samples", lambda: (b.js("return window.__consoleSamples") or 0) >= 2)
            before = b.js("return window.__consoleLast.t")
            restart(node)
            wait_for("samples after the restart", lambda: (b.js("return window.__consoleLast.t") or 0) > before + 3000, secs=60)
            wait_for("the stream marked live", lambda: "on" in b.js("return document.querySelector('#stream-state').className"))
            b.js("location.hash = 'cluster'")
            b.wait_view("cluster")
            limit = b.driver.find_element_by_css_selector("#form-transfer-limit input[name=limit]")
            limit.clear()
            limit.send_keys("3")
            b.driver.find_element_by_css_selector("#form-transfer-limit button").click()
            b.accept_confirm()
            wait_for("the action after the restart", lambda: any(a.startswith("ok") and "transfer-limit" in a for a in b.answers()))
            b.shot("after-restart")
            # While the node was down the stream's requests failed: the
            # browser logs those; nothing else may be in the log.
            b.assert_no_console_errors(allow=("/console/api/events", "ERR_CONNECTION_REFUSED"))

        check("every view renders without console errors", every_view_renders, results)
        check("the live charts move", charts_move, results)
        check("join, plan, commit through the console change the ring", join_plan_commit, results)
        check("a bucket type created in the console is usable by a client", bucket_type_usable, results)
        check("a refused action shows the node's reason, nothing changed", refused_action_shows_reason, results)
        check("bench reports are listed and open", reports_listed, results)
        check("the live stream reconnects after the node restarts", stream_reconnects_after_restart, results)

    return finish(results)


if __name__ == "__main__":
    sys.exit(main())
