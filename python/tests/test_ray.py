"""readout.ray on Ray clusters this test starts on localhost, each of
several nodes (Ray's own `cluster_utils.Cluster`: a head and worker nodes,
each with its own raylet and resources): blocks are scored on every worker
node (the manifest's node ids), the distributed decisions equal one
process's bit for bit, a worker killed mid-run loses no row and duplicates
none, a node removed while blocks are in flight loses none either, a rerun
after a killed job writes only what was missing, and the metrics over the
output are the CLI's `evaluate` numbers.

Run by `bash scripts/test.sh python`."""
import collections
import json
import logging
import os
import signal
import subprocess
import tempfile
import unittest

import pyarrow as pa
import pyarrow.parquet as pq

# Ray Data logs each dataset's plan and progress at INFO: a screen of it
# per run in the test command's output. Set before Ray Data configures its loggers.
os.environ.setdefault("RAY_DATA_LOG_LEVEL", "WARNING")
import ray  # noqa: E402
import ray.data  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import readout.ray  # noqa: E402
from readout import Engine, ReadoutError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "models", "qwen3-tiny-random-q4")
CLI = os.path.join(ROOT, "target", "debug", "readout")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "authored.jsonl")
OPTS = {"mode": "cloze", "calibration": "content-free"}


def authored():
    with open(FIXTURE) as f:
        return [json.loads(line) for line in f if line.strip()]


def timeless(rows):
    """Rows without the decision's wall-clock `ms` (and where they came
    from): everything else must be equal."""
    return [(r["state"], r["family"], r["gold"], {k: v for k, v in r["decision"].items() if k != "ms"})
            for r in rows]


def single_process(states):
    """The reference: one engine, one process, the same states in order."""
    engine = Engine(TINY, runtime="own", threads=2)
    rows = []
    for s, out in zip(states, engine.score_many(states, **OPTS)):
        if "error" in out:
            continue
        for c, d in zip(s["criteria"], out["decisions"]):
            rows.append({"state": s["id"], "family": c.get("family", ""), "gold": c.get("answer"), "decision": d})
    return rows


def start_cluster(*cpus):
    """A head with no CPU (the driver's node: nothing is scored there) and
    one worker node per entry of ``cpus``, with that many CPUs; the
    driver connected to it. Returns (cluster, worker nodes)."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=n) for n in cpus]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return cluster, nodes


def node_ids(nodes):
    return {n.node_id for n in nodes}


class Corpus:
    """The authored states five times over, with three bad rows, as JSONL
    in a temporary folder, and one process's decisions on them."""

    @classmethod
    def make_corpus(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        # The authored states five times over (ids made distinct), with
        # three rows no engine can score among them.
        states = []
        for k in range(5):
            for s in authored():
                states.append({**s, "id": f"{s['id']}-{k}"})
        # One criterion without a family: in Parquet's nested criteria
        # that is a null the engine must read as absent.
        del states[1]["criteria"][0]["family"]
        cls.states = states
        cls.bad = {7: "{not json", 30: json.dumps({**states[0], "id": "typo", "evidnce": "x"}),
                   61: json.dumps({**states[0], "id": "empty", "evidence": "  "})}
        lines = [json.dumps(s) for s in states]
        for at in sorted(cls.bad):
            lines.insert(at, cls.bad[at])
        cls.jsonl = os.path.join(cls.tmp.name, "states.jsonl")
        with open(cls.jsonl, "w") as f:
            f.write("\n".join(lines) + "\n")
        cls.reference = single_process(states)

    @classmethod
    def tearDownClass(cls):
        ray.shutdown()
        cls.cluster.shutdown()
        cls.tmp.cleanup()

    def out(self, name):
        return os.path.join(self.tmp.name, name)

    def run_job(self, out, **kw):
        kw.setdefault("block_bytes", 6000)
        return readout.ray.score(self.jsonl, out, model=TINY, runtime="own", actors=2,
                                 progress=kw.pop("progress", lambda s: None), **OPTS, **kw)

    def assert_complete(self, out):
        rows = readout.ray.read(out)
        keys = collections.Counter((r["position"], r["decision"]["id"]) for r in rows)
        self.assertEqual(max(keys.values()), 1, "a decision written twice")
        self.assertEqual(timeless(rows), timeless(self.reference))
        return rows

    def assert_manifest(self, out, summary):
        """The manifest names each block scored once, with the node that
        scored it, and agrees with the run's summary."""
        lines = readout.ray.manifest(out)
        self.assertEqual(len(lines), len({m["block"] for m in lines}), "a block in the manifest twice")
        self.assertEqual(collections.Counter(m["node"] for m in lines), collections.Counter(summary["nodes"]))
        return lines


class OnTwoNodes(Corpus, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster, cls.nodes = start_cluster(1, 1)
        cls.make_corpus()

    def test_decisions_equal_one_process_bit_for_bit_and_refusals_go_to_errors(self):
        out = self.out("plain")
        s = self.run_job(out)
        self.assertGreater(s["blocks"], 10)
        self.assertEqual(s["scored"], s["blocks"])
        self.assertEqual(s["states"], len(self.states) + 2)  # two of the bad rows parse as JSON
        self.assert_complete(out)
        # Both worker nodes scored blocks (the actors spread); the head,
        # with no CPU, none.
        lines = self.assert_manifest(out, s)
        self.assertEqual({m["node"] for m in lines}, node_ids(self.nodes))
        self.assertEqual(sorted(m["block"] for m in lines), sorted(b["name"] for b in readout.ray.plan(
            self.jsonl, 6000)))
        errs = readout.ray.errors(out)
        self.assertEqual(len(errs), 3)
        self.assertEqual([e["code"] for e in errs], ["invalid_input", "unknown_field", "empty_evidence"])
        self.assertEqual([e["state"] for e in errs], [None, "typo", "empty"])
        self.assertEqual(errs[1]["field"], "state.evidnce")
        with open(self.jsonl, "rb") as f:
            for e in errs:
                f.seek(e["position"])
                self.assertEqual(f.readline().decode().rstrip("\n"), self.bad[sorted(self.bad)[errs.index(e)]])

    def test_parquet_in_and_out_give_the_same_decisions(self):
        # The first half with criteria nested (structs: a criterion
        # without a family has a null there), the second as JSON text.
        half = len(self.states) // 2
        nested, text = self.out("a.parquet"), self.out("b.parquet")
        pq.write_table(pa.Table.from_pylist(self.states[:half]), nested, row_group_size=8)
        pq.write_table(pa.Table.from_pylist([{**s, "criteria": json.dumps(s["criteria"])}
                                             for s in self.states[half:]]), text, row_group_size=8)
        self.assertTrue(pa.types.is_list(pq.read_schema(nested).field("criteria").type))
        out = self.out("parquet")
        s = readout.ray.score([nested, text], out, model=TINY, runtime="own", actors=2, format="parquet",
                              progress=lambda s: None, **OPTS)
        self.assertEqual(s["blocks"], -(-half // 8) + -(-(len(self.states) - half) // 8))
        rows = readout.ray.read(out)
        self.assertEqual(timeless(rows), timeless(self.reference))
        self.assertEqual([r["position"] for r in rows][:3], [0, 0, 0])
        self.assertEqual(pq.read_table(os.path.join(out, "decisions", sorted(os.listdir(
            os.path.join(out, "decisions")))[0])).column_names[-1], "decision")
        self.assertEqual(readout.ray.errors(out), [])

    def test_a_worker_killed_mid_run_loses_no_row_and_duplicates_none(self):
        out = self.out("killed")
        seen = []

        def kill_first(summary):
            seen.append(summary)
            if len(seen) == 1:
                os.kill(summary["pid"], signal.SIGKILL)

        s = self.run_job(out, block_bytes=3000, progress=kill_first)
        self.assert_complete(out)
        pids = {x["pid"] for x in seen}
        # The killed actor was restarted (a third process loaded the model)
        # and did the block it was killed in.
        self.assertGreaterEqual(len(pids), 3, pids)
        self.assertEqual(len(s["load_seconds"]), 3)
        self.assertEqual(glob_tmp(out), [])

    def test_a_rerun_after_a_killed_job_writes_only_what_was_missing(self):
        out = self.out("resumed")
        first = self.run_job(out)
        names = sorted(os.listdir(os.path.join(out, "decisions")))
        # What a job killed mid-way leaves: some blocks whole, the rest not
        # written, and a temporary file a writer never renamed.
        lost = names[3::4]
        for n in lost:
            os.unlink(os.path.join(out, "decisions", n))
        stale = os.path.join(out, "decisions", lost[0] + ".tmp-1-deadbeef")
        with open(stale, "w") as f:
            f.write('{"half a row')
        kept = {n: os.stat(os.path.join(out, "decisions", n)).st_mtime_ns for n in names if n not in lost}
        again = self.run_job(out)
        self.assertEqual(again["done_before"], first["blocks"] - len(lost))
        self.assertEqual(again["scored"], len(lost))
        for n, mtime in kept.items():
            self.assertEqual(os.stat(os.path.join(out, "decisions", n)).st_mtime_ns, mtime, n)
        self.assert_complete(out)
        self.assertEqual(glob_tmp(out), [])
        # A third run finds everything done and starts no actor.
        self.assertEqual(self.run_job(out)["actors"], 0)

    def test_a_rerun_with_other_settings_is_refused(self):
        out = self.out("mismatch")
        self.run_job(out, block_bytes=100000)
        with self.assertRaises(ReadoutError) as e:
            readout.ray.score(self.jsonl, out, model=TINY, runtime="own", block_bytes=100000, mode="letters",
                              progress=lambda s: None)
        self.assertEqual((e.exception.code, e.exception.field), ("plan_mismatch", "readout"))
        with self.assertRaises(ReadoutError) as e:
            readout.ray.score(self.jsonl, out, model=TINY, runtime="own", block_bytes=100000, temprature=2)
        self.assertEqual((e.exception.code, e.exception.field), ("invalid_option", "temprature"))
        # A value the engine would refuse is refused before any actor starts
        # (no plan written for it), and the folder's run still resumes.
        bogus = self.out("bogus")
        with self.assertRaises(ReadoutError) as e:
            readout.ray.score(self.jsonl, bogus, model=TINY, runtime="own", mode="bogus", progress=lambda s: None)
        self.assertEqual(e.exception.code, "invalid_option")
        self.assertIn("bogus", str(e.exception))
        self.assertFalse(os.path.exists(bogus))
        self.assertEqual(self.run_job(out, block_bytes=100000)["actors"], 0)

    def test_metrics_over_the_output_equal_the_clis_evaluate(self):
        fixture = self.out("authored.jsonl")
        with open(fixture, "w") as f:
            f.writelines(json.dumps(s) + "\n" for s in self.states)
        report = self.out("evaluate.json")
        subprocess.run([CLI, "evaluate", "--model", TINY, "--runtime", "own", "--threads", "2", "--mode", "cloze",
                        "--calibration", "content-free", "--out", report, fixture],
                       check=True, capture_output=True, cwd=ROOT)
        with open(report) as f:
            cli = json.load(f)
        out = self.out("evaluated")
        readout.ray.score(fixture, out, model=TINY, runtime="own", actors=2, block_bytes=5000,
                          progress=lambda s: None, **OPTS)
        got = readout.ray.evaluate(out)
        self.assertEqual(got["report"], cli["report"])
        self.assertEqual(got["calibration"], cli["calibration"])
        self.assertEqual(got["scored"], cli["criteria"])

    def test_an_unfinished_run_is_not_evaluated(self):
        out = self.out("unfinished")
        self.run_job(out, block_bytes=50000)
        os.unlink(os.path.join(out, "decisions", sorted(os.listdir(os.path.join(out, "decisions")))[0]))
        with self.assertRaises(ReadoutError) as e:
            readout.ray.evaluate(out)
        self.assertEqual(e.exception.code, "incomplete")
        self.assertLess(len(readout.ray.read(out, complete=False)), len(self.reference))


class OnALostNode(Corpus, unittest.TestCase):
    """Two worker nodes, one with a CPU to spare: the other is removed
    (its raylet and every process on it killed) while its actor has
    blocks in flight."""

    @classmethod
    def setUpClass(cls):
        cls.cluster, cls.nodes = start_cluster(2, 1)
        cls.make_corpus()

    def test_a_node_removed_mid_run_loses_no_row_and_duplicates_none(self):
        out = self.out("lost-node")
        doomed = self.nodes[1]
        seen, removed = [], []

        def remove_doomed(summary):
            seen.append(summary)
            if not removed and summary["node"] == doomed.node_id:
                self.cluster.remove_node(doomed, allow_graceful=False)
                removed.append(len(seen))

        s = self.run_job(out, block_bytes=3000, progress=remove_doomed)
        self.assertTrue(removed, "the doomed node scored no block")
        self.assert_complete(out)
        self.assertEqual(glob_tmp(out), [])
        lines = self.assert_manifest(out, s)
        self.assertEqual(len(lines), s["blocks"])
        # After the removal, blocks went on ending on the node left (a
        # result the lost node had sent before it died may still arrive),
        # the last of them there.
        after = [m["node"] for m in lines[removed[0]:]]
        left = self.nodes[0].node_id
        self.assertGreater(after.count(left), after.count(doomed.node_id), after)
        self.assertEqual(after[-1], left)
        # The lost node's actor was restarted there and loaded the model.
        self.assertEqual(len(s["load_seconds"]), 3)


def glob_tmp(out):
    return [n for sub in ("decisions", "errors") for n in os.listdir(os.path.join(out, sub)) if ".tmp-" in n]


if __name__ == "__main__":
    unittest.main()
