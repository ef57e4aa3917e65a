"""infeed.ray: a pipeline's streams on the actors of a two-node Ray cluster on
this machine (scripts/ray-cluster.sh; scripts/test.sh starts it and sets
INFEED_RAY_ADDRESS). Every remote run is compared with the same pipeline run
locally: the same batches, rows, real rows and states."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from conftest import LM, LM_SPEC, TESTDATA, assert_same_batches
from processes import free_port, run_processes
from records import example, write_tfrecord

import infeed

if "INFEED_RAY_ADDRESS" not in os.environ:
    pytest.skip(
        "no Ray cluster: bash scripts/ray-cluster.sh start; "
        'eval "$(bash scripts/ray-cluster.sh env)"',
        allow_module_level=True,
    )

import ray  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

import infeed.ray  # noqa: E402

ADDRESS = os.environ["INFEED_RAY_ADDRESS"]
# The second node's custom resource: actors that ask for it land there.
STREAMS_NODE = {"infeed_streams": 1}


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(address=ADDRESS, logging_level=logging.ERROR, log_to_driver=False)
    yield
    ray.shutdown()


def streams(n: int = 4, epochs: int | None = 3) -> infeed.Pipeline:
    """The lm sample in ``n`` logical streams, shuffled, parsed."""
    return (
        infeed.Pipeline.from_files([LM])
        .streams(n)
        .seed(1)
        .shuffle(64)
        .repeat(epochs)
        .parse(LM_SPEC)
    )


def padded(drop: bool = True) -> infeed.Pipeline:
    p = streams().pad_to_multiple_of(64).max_length(512).cast("int32")
    return p.batch(16, drop_remainder=drop)


def remote(p: infeed.Pipeline, actors: int = 2, **kw) -> infeed.ray.RemotePipeline:
    return infeed.ray.remote(p, actors, resources=STREAMS_NODE, **kw)


def run(it, steps: int | None = None) -> tuple[list[dict], list]:
    """Owned copies of the batches, and after each its real rows, positions
    and state."""
    batches, rows = [], []
    for b in itertools.islice(it, steps):
        batches.append({k: v.copy() for k, v in b.items()})
        rows.append((it.real_rows, it.positions(), it.get_state()))
    return batches, rows


PIPELINES = {
    "padded": lambda: padded(),
    # Streams end at different steps: their short groups and ended streams.
    "padded, remainder kept": lambda: padded(drop=False),
    "packed": lambda: streams().pack(512).batch(8),
    "buckets": lambda: streams(epochs=None)
    .bucket_by_length("input_ids", [128, 256], [16, 8, 8])
    .max_length(512),
    # To the end: streams whose input ended send their waiting records in
    # the step's rows (group/scheduled.rs).
    "buckets, finite": lambda: streams(epochs=1)
    .bucket_by_length("input_ids", [128, 256], [16, 8, 8])
    .max_length(512)
    .drop_remainder(False),
    # Every actor counts every stream's batches (the count pass), so they
    # all stop at the local run's last step.
    "equal batches, padded": lambda: infeed.Pipeline.from_files([LM])
    .equal_batches("pad")
    .streams(4)
    .seed(1)
    .shuffle(64)
    .repeat(2)
    .parse(LM_SPEC)
    .pad_to_multiple_of(64)
    .max_length(512)
    .batch(16, drop_remainder=False),
    "equal batches, buckets": lambda: infeed.Pipeline.from_files([LM])
    .equal_batches("drop")
    .streams(4)
    .seed(1)
    .repeat(2)
    .parse(LM_SPEC)
    .bucket_by_length("input_ids", [128, 256], [16, 8, 8])
    .max_length(512),
    "mixture": lambda: infeed.Pipeline.mix(
        {"a": infeed.Pipeline.from_files([LM]), "b": infeed.Pipeline.from_files([LM]).shuffle(32)},
        {"a": 1, "b": 2},
    )
    .streams(4)
    .seed(3)
    .parse(LM_SPEC)
    .fixed_length(512)
    .batch(8),
    "global shuffle": lambda: infeed.Pipeline.from_files([LM])
    .streams(4)
    .seed(2)
    .global_shuffle()
    .repeat(2)
    .parse(LM_SPEC)
    .pad_to_multiple_of(64)
    .max_length(512)
    .batch(8),
}


@pytest.mark.parametrize("name", list(PIPELINES))
def test_remote_batches_are_the_local_ones(name):
    p = PIPELINES[name]()
    steps = 40 if name == "buckets" else None  # for ever: its first steps
    want, want_rows = run(p.iter(), steps)
    with remote(p).iter() as it:
        got, got_rows = run(it, steps)
    assert_same_batches(got, want)
    assert got_rows == want_rows
    assert len(want) > 20


def test_images_and_bytes_are_the_local_ones(tmp_path):
    # PNGs decoded, cropped at random and flipped on the actors, normalized;
    # a bytes feature travels as Python objects.
    from test_images import _pixels, _png

    spec: dict[str, infeed.FixedLen | infeed.Image] = {
        "image": infeed.Image(8, 8, 3, mode="train", flip=True),
        "label": infeed.FixedLen([], "int64"),
        "image_bytes": infeed.FixedLen([], "bytes"),
    }
    path = tmp_path / "images.tfrecord"
    pngs = [_png(_pixels(6 + i % 3, 8, i)) for i in range(40)]
    write_tfrecord(
        path,
        [
            example({"image": [png], "label": [i], "image_bytes": [png[: 12 + i]]})
            for i, png in enumerate(pngs)
        ],
    )
    p = (
        infeed.Pipeline.from_files([path])
        .streams(4)
        .seed(5)
        .shuffle(8)
        .repeat(2)
        .parse(spec)
        .normalize("image", (120.0, 110.0, 100.0), (50.0, 60.0, 70.0))
        .batch(8, drop_remainder=False)
    )
    want, want_rows = run(p.iter())
    with remote(p).iter() as it:
        got, got_rows = run(it)
    assert want[0]["image_bytes"].dtype == object
    assert_same_batches(got, want)
    assert got_rows == want_rows
    assert len(want) == 10


def test_map_batch_runs_on_the_trainer_after_the_join():
    def tokens(batch):
        return {"tokens": batch["input_ids_mask"].sum(axis=1, keepdims=True)}

    p = padded().map_batch(tokens)
    want, _ = run(p.iter())
    with remote(p).iter() as it:
        got, _ = run(it)
    assert_same_batches(got, want)
    assert list(got[0]) == ["tokens"]


def test_a_state_moves_between_actor_counts_and_a_local_run():
    p = padded()
    want, want_rows = run(p.iter())
    with remote(p).iter() as it:
        first, _ = run(it, 5)
        state = it.get_state()
    assert_same_batches(first, want[:5])
    for resume in (remote(p, 1), remote(p, 4), p):
        it = resume.iter(state)
        rest, rows = run(it)
        if resume is not p:
            it.close()
        assert_same_batches(rest, want[5:])
        assert [r[:2] for r in rows] == [r[:2] for r in want_rows[5:]]
    # A local run's state continues on actors, through PyTorch's protocol.
    local = p.iter()
    run(local, 9)
    it = remote(p).iter()
    it.load_state_dict(local.state_dict())
    rest, _ = run(it)
    it.close()
    assert_same_batches(rest, want[9:])


def test_one_trainers_state_continues_on_two_trainers_with_their_actors():
    # One training process with two actors, then the job grows to two
    # processes, each with two actors of its half of the streams: each
    # continues as that host of the same pipeline run locally does.
    def host(i: int, n: int) -> infeed.Pipeline:
        p = streams().shard(i, n).pad_to_multiple_of(64).max_length(512).cast("int32")
        return p.batch(16 // n, drop_remainder=False)

    with remote(host(0, 1)).iter() as it:
        run(it, 5)
        state = it.get_state()
    for i in range(2):
        want, want_rows = run(host(i, 2).iter(state))
        with remote(host(i, 2)).iter(state) as it:
            got, got_rows = run(it)
        assert len(want) > 5
        assert_same_batches(got, want)
        assert got_rows == want_rows


def six_then_kill(it) -> list[dict]:
    """Six batches of ``it``, then actor 1's process killed (SIGKILL)."""
    got, _ = run(it, 6)
    pid, _ = ray.get(it.actor_handles()[1].where.remote())
    os.kill(pid, signal.SIGKILL)
    return got


def test_an_actor_killed_mid_run_loses_and_repeats_nothing():
    p = padded()
    want, _ = run(p.iter())
    with remote(p, in_flight=3, batches_per_call=2).iter() as it:
        assert it.figures()
        got = six_then_kill(it)
        assert it.figures() == {}  # while an actor is dead
        rest, _ = run(it)
        assert it.restarts == 1
        # The dead actor's counts, as last seen, stay in the host's.
        read = it.figures()["record_account"]["read"]
        now = [ray.get(a.figures.remote()) for a in it.actor_handles()]
        assert read > sum(f["record_account"]["read"] for f in now)
    assert_same_batches(got + rest, want)


def kill_session(sid: int) -> None:
    """SIGKILL to every process of session ``sid`` (a node's processes: its
    actors have process groups of their own)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            if int(fields[3]) == sid:  # the session id
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def test_a_replacement_that_does_not_start_is_started_again_on_the_next_call():
    p = padded()
    want, _ = run(p.iter())
    with remote(p, in_flight=3, batches_per_call=2).iter() as it:
        got = six_then_kill(it)
        start = it._remote._start_actors

        def fails_once(which, states):
            it._remote._start_actors = start  # type: ignore[method-assign]
            raise infeed.ray.RayError("no room this time")

        it._remote._start_actors = fails_once  # type: ignore[method-assign]
        middle = []
        with pytest.raises(infeed.ray.RayError, match="no room this time"):
            for b in it:
                middle.append({k: v.copy() for k, v in b.items()})
        rest, _ = run(it)
        assert it.restarts == 1
    assert_same_batches(got + middle + rest, want)
    with pytest.raises(infeed.ray.RayError, match="this iterator is closed"):
        next(it)


def test_a_node_lost_with_its_actors_and_their_parts_loses_and_repeats_nothing(tmp_path):
    # A third node, which the actors prefer; it dies (every process of it,
    # SIGKILL) with parts made and not yet received: they are lost with its
    # object store (8 steps a call: too large to travel inline), and the
    # actors start again elsewhere from the last part received.
    before = {n["NodeID"] for n in ray.nodes()}
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    with open(tmp_path / "node.log", "w") as log:
        node = subprocess.Popen(
            [ray_cli, "start", "--block", f"--address={ADDRESS}", "--node-ip-address=127.0.0.1",
             "--num-cpus=2", "--object-store-memory=200000000", "--disable-usage-stats"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (new := [n for n in ray.nodes() if n["Alive"] and n["NodeID"] not in before]):
            assert node.poll() is None and time.monotonic() < deadline, "the node did not start"
            time.sleep(0.5)
        there = NodeAffinitySchedulingStrategy(new[0]["NodeID"], soft=True)
        p = padded()
        want, _ = run(p.iter())
        lost = infeed.ray.remote(
            p, 2, num_cpus=1, scheduling_strategy=there, in_flight=2, batches_per_call=8
        )
        with lost.iter() as it:
            got, _ = run(it, 3)
            ray.wait(list(it._pending[0]), num_returns=len(it._pending[0]), fetch_local=False)
            kill_session(node.pid)
            node.wait()
            rest, _ = run(it)
            assert it.restarts == 2
            nodes = {n for _, n in ray.get([a.where.remote() for a in it.actor_handles()])}
            assert new[0]["NodeID"] not in nodes
        assert_same_batches(got + rest, want)
    finally:
        kill_session(node.pid)
        node.wait()


def test_actors_land_on_the_node_with_their_resource():
    streams_node = [n["NodeID"] for n in ray.nodes() if "infeed_streams" in n["Resources"]]
    with remote(padded()).iter() as it:
        nodes = {node for _, node in ray.get([a.where.remote() for a in it.actor_handles()])}
    assert nodes == set(streams_node)
    assert ray.get_runtime_context().get_node_id() not in nodes


@pytest.mark.parametrize("per_call", [1, 3])
def test_a_slow_trainer_holds_the_actors_back(per_call):
    def made(taken: int) -> list[int]:
        # The calls whose parts were taken (a call is received whole when
        # its first part is needed), and 2 more asked for then.
        return [((taken + per_call - 1) // per_call + 2) * per_call] * 2

    with remote(padded(), in_flight=2, batches_per_call=per_call).iter() as it:
        taken = 0
        for more in (3, 4):
            run(it, more)
            taken += more
            # An actor runs its calls in order, so this answers after every
            # call asked for before it.
            assert it.parts_served() == made(taken)


def test_what_cannot_run_on_actors_is_refused_by_name():
    lm = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).fixed_length(512)
    with pytest.raises(ValueError, match=r"logical streams \(\.streams\(L\)\).*it has none"):
        infeed.ray.remote(lm.batch(8), 2)
    with pytest.raises(ValueError, match="L a multiple of 4; it has 2"):
        infeed.ray.remote(lm.streams(2).batch(8), 4)
    with pytest.raises(ValueError, match="a batch of 6 rows does not split over 4 actors"):
        infeed.ray.remote(lm.streams(4).batch(6), 4)
    with pytest.raises(infeed.ray.RayError, match="were not placed in 2 s; the cluster has"):
        infeed.ray.remote(padded(), 2, resources={"infeed_nowhere": 1}, placement_timeout=2).iter()


def test_without_ray_installed_the_import_error_says_what_to_install():
    script = """
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed
        for name in ("infeed.ray", "infeed.ray_data"):
            try:
                __import__(name)
            except ImportError as e:
                print(e)
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(out) == 2
    assert out[0].startswith("infeed.ray needs Ray (")
    assert out[0].endswith("pip install 'infeed[ray]' (the Ray version it is tested with)")
    assert out[1].startswith("infeed.ray_data needs Ray Data (")
    assert "pip install 'infeed[ray-data]'" in out[1]


def test_a_placement_groups_bundles_take_one_actor_each():
    from ray.util.placement_group import (
        placement_group,
        placement_group_table,
        remove_placement_group,
    )

    # Bundle 0 on the head (the only other node), bundle 1 on the streams node.
    group = placement_group([{"CPU": 0.5}, {"CPU": 0.5, **STREAMS_NODE}], strategy="STRICT_SPREAD")
    ray.get(group.ready(), timeout=60)
    try:
        p = padded()
        with pytest.raises(ValueError, match="has 2 bundles; each of the 4 actors takes one"):
            infeed.ray.remote(p, 4, placement_group=group)
        with pytest.raises(ValueError, match="a scheduling_strategy or a placement_group"):
            infeed.ray.remote(p, 2, placement_group=group, scheduling_strategy="SPREAD")
        with pytest.raises(ValueError, match=r"bundle 0 of the placement group holds .*CPU"):
            infeed.ray.remote(p, 2, placement_group=group)  # 1 CPU an actor
        with pytest.raises(ValueError, match="bundle 0 of the placement group"):
            infeed.ray.remote(p, 2, num_cpus=0.5, resources=STREAMS_NODE, placement_group=group)
        want, _ = run(p.iter())
        r = infeed.ray.remote(p, 2, num_cpus=0.5, placement_group=group, batches_per_call=2)
        with r.iter() as it:
            got, _ = run(it, 6)
            placed = ray.get([a.where.remote() for a in it.actor_handles()])
            # Killed, actor 1 comes back in its bundle.
            os.kill(placed[1][0], signal.SIGKILL)
            rest, _ = run(it)
            assert it.restarts == 1
            again = ray.get([a.where.remote() for a in it.actor_handles()])
        assert_same_batches(got + rest, want)
        bundles = placement_group_table(group)["bundles_to_node_id"]
        nodes = [node for _, node in placed]
        assert nodes == [bundles[0], bundles[1]]
        assert nodes[0] != nodes[1]
        assert again[1][0] != placed[1][0]
        assert [node for _, node in again] == nodes
    finally:
        remove_placement_group(group)


def test_without_ray_running_the_error_says_so():
    script = f"""
        import infeed, infeed.ray
        p = infeed.Pipeline.from_files([{str(LM)!r}]).streams(2).parse("input_ids:var_len:int64")
        try:
            infeed.ray.remote(p.fixed_length(512).batch(4), 2)
        except infeed.ray.RayError as e:
            print(e)
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, check=True
    ).stdout
    assert "Ray is not initialized in this process; call ray.init(address=...) first" in out


def test_an_actors_error_reaches_the_trainer_with_its_fields(tmp_path):
    data = bytearray(LM.read_bytes())
    data[20_000] ^= 0xFF  # inside a record's payload
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(data)
    p = infeed.Pipeline.from_files([bad]).streams(2).parse(LM_SPEC).fixed_length(512).batch(8)
    with pytest.raises(infeed.CorruptRecordError) as want:
        list(p)
    with pytest.raises(infeed.CorruptRecordError) as got:
        with remote(p).iter() as it:
            list(it)
    assert (got.value.path, got.value.offset) == (want.value.path, want.value.offset)
    assert got.value.path == str(bad)


# Two JAX processes, each host i of 2 with its own two actors: the global
# arrays of every step are the one-host pipeline's batches.
TWO_TRAINERS = """
import itertools
import numpy as np
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id={pid})
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import ray
import infeed, infeed.jax, infeed.ray

ray.init(address={address!r}, logging_level="ERROR", log_to_driver=False)
def job(batch):
    return (infeed.Pipeline.from_files([{lm!r}]).streams(4).seed(1).shuffle(64).repeat()
            .parse("input_ids:var_len:int64").pad_to_multiple_of(64).max_length(512)
            .batch(batch))
mine = job(8).shard(jax.process_index(), 2)
remote = infeed.ray.remote(mine, 2, num_cpus=0.5, resources={{"infeed_streams": 1}})
sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
steps = 0
steps_of = lambda it: itertools.islice(it, 30)
device = infeed.jax.device_iterator(remote, sharding)
for batch, want in zip(steps_of(device), steps_of(job(16))):
    for name, array in batch.items():
        full = multihost_utils.process_allgather(array, tiled=True)
        np.testing.assert_array_equal(full, want[name], err_msg=f"step {{steps}} {{name}}")
    steps += 1
with open({state!r} + str(jax.process_index()), "wb") as f:
    f.write(device.get_state())
device.close()
print("steps", steps)
"""


def test_two_jax_processes_each_with_their_actors_feed_the_one_host_batches(tmp_path):
    port = free_port()
    state = str(tmp_path / "state")
    argvs = [
        [
            sys.executable,
            "-c",
            TWO_TRAINERS.format(port=port, pid=i, address=ADDRESS, lm=str(LM), state=state),
        ]
        for i in range(2)
    ]
    outs = run_processes(argvs)
    steps = [out.split()[-1] for out in outs]
    assert steps == ["30", "30"], steps
    # Their states, merged, continue on one trainer with four actors: the
    # one-host batches from step 30 on.
    merged = infeed.merge_states([open(state + str(i), "rb").read() for i in range(2)])
    job = (
        infeed.Pipeline.from_files([LM])
        .streams(4)
        .seed(1)
        .shuffle(64)
        .repeat()
        .parse("input_ids:var_len:int64")
        .pad_to_multiple_of(64)
        .max_length(512)
        .batch(16)
    )
    want, _ = run(job.iter(), 40)
    with remote(job, 4).iter(merged) as it:
        rest, _ = run(it, 10)
    assert_same_batches(rest, want[30:])


def test_the_shape_schedule_is_the_host_pipelines():
    # Its actors' digests are of their own batch sizes; processes comparing
    # schedules must see the host's, remote or not.
    for p in (padded(), streams().bucket_by_length("input_ids", [128], [8, 4]).max_length(512)):
        with p.iter() as local, remote(p).iter() as far:
            assert far.shape_schedule == local.shape_schedule != 0


def test_device_iterator_takes_a_remote_pipeline_and_its_state():
    import jax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import infeed.jax

    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
    p = padded()
    want, _ = run(p.iter())
    it = infeed.jax.device_iterator(remote(p), sharding)
    got = [{k: np.asarray(v) for k, v in b.items()} for b in itertools.islice(it, 4)]
    state = it.get_state()
    it.close()
    assert_same_batches(got, want[:4])
    rest, _ = run(p.iter(state))
    assert_same_batches(rest, want[4:])


def test_orbax_saves_a_remote_iterator_and_restores_it_on_other_actors(tmp_path):
    import orbax.checkpoint as ocp

    import infeed.orbax

    p = padded()
    want, _ = run(p.iter())
    it = remote(p).iter()
    run(it, 7)
    with ocp.CheckpointManager(tmp_path / "ckpt") as mngr:
        mngr.save(7, args=ocp.args.Composite(data=infeed.orbax.CheckpointSave(it)))
        mngr.wait_until_finished()
    it.close()
    fresh = remote(p, 4).iter()
    with ocp.CheckpointManager(tmp_path / "ckpt") as mngr:
        mngr.restore(7, args=ocp.args.Composite(data=infeed.orbax.CheckpointRestore(fresh)))
    rest, _ = run(fresh)
    fresh.close()
    assert_same_batches(rest, want[7:])


def test_padded_features_travel_without_their_padding_and_come_back_exactly():
    from infeed.ray import _MaskOf, _put, _Unpadded, _unpadded

    ids = np.array([[5, 6, 0, 0], [7, 0, 0, 0], [0, 0, 0, 0]], np.int32)
    batch = {
        "ids": ids,
        "ids_mask": (ids != 0).astype(np.uint8),
        # Not sent so: a mask with a hole, and padding that is not zeros.
        "holes": ids.copy(),
        "holes_mask": np.array([[1, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], np.uint8),
        "dirty": np.array([[1, 9, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0]], np.int64),
        "dirty_mask": np.array([[1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], np.int64),
        "label": np.array([1, 2, 3]),
        # Other dtypes: float values, a bool mask.
        "weights": np.array([[0.5, 0, 0, 0], [1.5, 2.5, 3.5, 0], [0, 0, 0, 0]], np.float32),
        "weights_mask": np.array([[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]], bool),
    }
    columns = _unpadded(batch)
    ids, weights = columns["ids"], columns["weights"]
    assert isinstance(ids, _Unpadded) and isinstance(weights, _Unpadded)
    assert isinstance(columns["ids_mask"], _MaskOf)
    assert isinstance(columns["weights_mask"], _MaskOf)
    assert ids.values.tolist() == [5, 6, 7]
    assert weights.values.tolist() == [0.5, 1.5, 2.5, 3.5]
    assert weights.lengths.tolist() == [1, 3, 0]
    sent = ("ids", "ids_mask", "weights", "weights_mask")
    assert all(isinstance(columns[k], np.ndarray) for k in batch if k not in sent)
    for name, want in batch.items():
        # Into a wider batch whose rows hold an earlier batch's bytes: the
        # two rows written are whole, the others untouched.
        wider = tuple(d + 2 for d in want.shape[1:])
        earlier = np.full((5, *wider), 9, want.dtype)
        out = earlier.copy()
        _put(out, 1, 2, columns[name])  # two rows, from row 1
        expected = np.zeros((2, *wider), want.dtype)
        expected[(slice(None),) + tuple(map(slice, want.shape[1:]))] = want[:2]
        np.testing.assert_array_equal(out[1:3], expected, err_msg=name)
        np.testing.assert_array_equal(out[[0, 3, 4]], earlier[[0, 3, 4]], err_msg=name)


def test_figures_add_up_the_actors_and_count_the_trainers_own_batches():
    p = padded()
    with p.iter() as local:
        steps = sum(1 for _ in local)
        want = local.figures()
    with remote(p).iter() as it:
        assert sum(1 for _ in it) == steps
        got = it.figures()
    assert got.keys() == want.keys()
    # Every record read, delivered and left out, once, over the actors.
    assert got["record_account"] == want["record_account"]
    assert got["read"]["records"] == want["read"]["records"]
    assert (got["batches"], got["workers"]) == (steps, 2)
    assert 0 <= got["consumer_wait"] < got["elapsed"]
    assert it.figures() == {}  # closed


def test_padding_rows_are_the_local_ones_when_not_zeros():
    # 6 records in 2 streams, batches of 4: the last step has 2 rows of
    # data, and a normalized feature's padding rows are (0 - mean) / std.
    p = (
        infeed.Pipeline.from_files([TESTDATA / "examples.tfrecord"])
        .streams(2)
        .parse({"label": infeed.FixedLen([], "int64")})
        .normalize("label", 10.0, 2.0)
        .batch(4, drop_remainder=False)
    )
    want, want_rows = run(p.iter())
    assert [real for real, _, _ in want_rows] == [4, 2]
    assert want[1]["label"][2:].tolist() == [-5.0, -5.0]
    with remote(p).iter() as it:
        got, got_rows = run(it)
    assert_same_batches(got, want)
    assert got_rows == want_rows


def test_a_pipeline_that_does_not_start_on_its_actors_is_its_error():
    with pytest.raises(infeed.StateError):
        list(padded().iter(b"not a state"))
    with pytest.raises(infeed.StateError):
        remote(padded()).iter(b"not a state")


def test_an_error_after_good_steps_of_a_call_comes_after_them(tmp_path):
    data = bytearray(LM.read_bytes())
    data[200_000] ^= 0xFF  # a payload late in the file
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(data)
    p = infeed.Pipeline.from_files([bad]).streams(2).parse(LM_SPEC).fixed_length(512).batch(4)
    local = p.iter()
    want = []
    with pytest.raises(infeed.CorruptRecordError):
        for b in local:
            want.append({k: v.copy() for k, v in b.items()})
    assert len(want) > 5
    got = []
    with pytest.raises(infeed.CorruptRecordError):
        with remote(p, batches_per_call=16).iter() as it:
            for b in it:
                got.append(b)
    assert_same_batches(got, want)
