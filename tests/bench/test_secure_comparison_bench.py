"""Secure two-party comparison (issue 17): the shape of [D] Tables 8.1–8.3 and a federated GROUP BY.

Run with ``.venv/bin/python -m pytest -q -m bench tests/bench/test_secure_comparison_bench.py -s`` (part of
``make bench``; needs no data; a few minutes on the 2-core project machine, most of it at 2048 bits).

* ``test_type1_costs[1024|2048]`` — the optimized Type 1 protocol (:mod:`mechanisms.secure.type1`) for
  ℓ = 5, 10, 25, 50, 100, both parties in this thread (one thread, no process pool), one key pair per key
  size, inputs and shares from a fixed seed (Bob's protocol coins and the encryption randomness come from
  the OS CSPRNG, as in production). Per run: fresh pools are filled with exactly
  :func:`type1_pool_demand` values (*precomputation*, timed), then the parties are driven message by message
  (*online*, timed: everything after the pools are full, including encoding and decoding every message,
  with no network; also as this thread's CPU time, which a loaded machine disturbs less). The bench checks
  ``online_draws == 0`` and empty pools afterwards — the online phase computed no ``r^N`` — the output
  (δ^A ⊕ δ^B = [x ≥ y]), 2ℓ + 6 ciphertexts (ℓ + 4 from Alice, ℓ + 2 from Bob), 8 messages and 6 flights. Communication is the bytes of the encoded messages both ways (version-1
  format: 2 header bytes, 4-byte lengths; no transport framing). Initialization ([D] Table 8.3) is
  :func:`generate_keypair` alone. Median of ``RUNS`` runs each.

  Per-step times in the spirit of [D] Table 8.2: each party's program (the generator behind
  :class:`~mechanisms.secure.party.Party`) is advanced one ``yield`` at a time, and each segment of
  computation is charged to the step whose message it produces (or, if it produces none, the message it
  consumed): ``EncryptedShare`` → step 1 (Conversion 3); ``MaskedDifference``, ``EncryptedQuotient`` →
  Conversion 5 itself; ``PointEncoding``, ``MembershipTests``, ``EncryptedBit`` → the Type 3 subroutine
  (Protocol 2 without its steps 4–5); ``MaskedResult`` and Alice's final decryption → step 3 (Conversion 4).
  Two small misattributions, a few microseconds each: Bob's completion of E(y) (one multiplication) falls
  in Conversion 5, and Bob's last segment — Type 3's XOR with s^B and Conversion 5's final combination
  (an inversion, two multiplications) — in Conversion 4.

* ``test_federated_group_by_50_cells[2048|1024]`` — two ``veil serve`` sites built like
  :func:`proxy.federation.sites.build_sites` but with a 50-value public region domain (build_sites has 10),
  k = 20 (so ℓ = 6), ε = 1 per site; site A asks, site B answers. After each site's CPU has gone idle
  (A's key generation and pool filling at start; both sites' pool refills after every query, which would
  otherwise compete with the next query), ``SELECT region, COUNT(*) FROM hospitals GROUP BY region`` is
  timed through psycopg on an open connection: once cold (B has no pool for A's fresh key yet, so B
  computes its r^N online) and then ``FEDERATED_RUNS`` times warm (median). Bytes exchanged are read from the
  query's NOTICE. Correctness: 50 rows, exactly the 25 large regions released (NOTICE agrees).

Reference numbers are [D] §8.2 as transcribed in the spec (../shared/spec/secure-comparison.md §9): 1024-bit
Paillier on an Intel Core i7-4790 (3.6 GHz), mean of 10 runs, their implementation — recorded references,
not measured here. Timings are never asserted.
"""

from __future__ import annotations

import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import pytest

from mechanisms.secure import (
    ComparisonParameters,
    EncryptedBit,
    EncryptedQuotient,
    EncryptedShare,
    KeyPair,
    MaskedDifference,
    MaskedResult,
    MembershipTests,
    Message,
    Party,
    PointEncoding,
    RandomnessPool,
    Type1Alice,
    Type1Bob,
    decode_message,
    generate_keypair,
    run_local,
    split_plaintext,
    type1_ciphertexts,
    type1_pool_demand,
)

pytestmark = pytest.mark.bench

RUNS = 11
FEDERATED_RUNS = 5
BIT_LENGTHS = (5, 10, 25, 50, 100)
INPUT_SEED = 17

# [D] §8.2 (spec §9), 1024 bits, mean of 10 runs: recorded references, not measured here.
SEED_TOTAL_MS = {5: 47.731, 10: 47.700, 25: 50.301, 50: 56.419, 100: 65.459}
SEED_KB = {5: 5.294, 10: 8.399, 25: 17.715, 50: 33.243, 100: 64.296}
SEED_STEPS_MS = {
    "step1": {5: 0.011, 10: 0.011, 25: 0.011, 50: 0.012, 100: 0.012},
    "conv5": {5: 47.350, 10: 47.679, 25: 50.279, 50: 56.396, 100: 65.435},
    "type3": {5: 38.626, 10: 38.678, 25: 38.220, 50: 38.030, 100: 35.000},
    "conv5_own": {5: 8.724, 10: 9.001, 25: 12.059, 50: 18.366, 100: 30.435},
    "conv4": {5: 0.010, 10: 0.010, 25: 0.011, 50: 0.011, 100: 0.011},
}
SEED_INIT_MS = 89.124

STEP_OF: dict[type[Message], str] = {
    EncryptedShare: "step1",
    MaskedDifference: "conv5_own",
    EncryptedQuotient: "conv5_own",
    PointEncoding: "type3",
    MembershipTests: "type3",
    EncryptedBit: "type3",
    MaskedResult: "conv4",
}
STEP_ROWS = (
    ("step1", "Step 1 (Conversion 3)"),
    ("conv5", "Step 2 (Conversion 5 incl. subroutine)"),
    ("type3", "Step 2: Type 3 subroutine (Protocol 2 w/o steps 4–5)"),
    ("conv5_own", "Step 2: Conversion 5 except subroutine"),
    ("conv4", "Step 3 (Conversion 4)"),
)


# --------------------------------------------------------------------------- Type 1, driven step by step


class Stepper:
    """One party's program advanced one ``yield`` at a time; each segment's time goes to a step."""

    def __init__(self, party: Party[int], times: dict[str, int]) -> None:
        # The same generator Party.start()/receive() advance (mechanisms/secure/party.py), without the
        # wrapper, so that the computation between two yields can be timed on its own.
        self._program = party._run()
        self._times = times
        self._last = "step1"
        self.output: int | None = None

    def advance(self, incoming: Message | None) -> list[Message]:
        """Feed ``incoming`` (None to start); the messages produced until the program waits or ends."""
        produced: list[Message] = []
        while True:
            started = perf_counter_ns()
            try:
                item = self._program.send(incoming)
            except StopIteration as stop:
                self._times["conv4"] += perf_counter_ns() - started
                self.output = int(stop.value)
                return produced
            elapsed = perf_counter_ns() - started
            if isinstance(item, Message):
                step = self._last = STEP_OF[type(item)]
                produced.append(item)
            elif incoming is not None:
                step = STEP_OF[type(incoming)]
            else:
                step = self._last
            self._times[step] += elapsed
            if not isinstance(item, Message):
                return produced  # waiting for the peer
            incoming = None


@dataclass
class Run:
    precompute_ns: int
    online_ns: int
    online_cpu_ns: int
    steps: dict[str, int]
    alice_ns: int
    bob_ns: int
    codec_ns: int
    bytes_total: int
    ciphertexts: Counter[str] = field(default_factory=Counter)
    messages: int = 0
    flights: int = 0


def one_comparison(keypair: KeyPair, bit_length: int, rng: random.Random) -> Run:
    modulus = keypair.public.n
    params = ComparisonParameters(bit_length)
    x, y = rng.randrange(1 << bit_length), rng.randrange(1 << bit_length)
    x_a, x_b = split_plaintext(x, modulus, rng)
    y_a, y_b = split_plaintext(y, modulus, rng)
    alice_pool, bob_pool = RandomnessPool(keypair.public), RandomnessPool(keypair.public)
    alice_demand, bob_demand = type1_pool_demand(bit_length)

    started = perf_counter_ns()
    alice_pool.fill(alice_demand)
    bob_pool.fill(bob_demand)
    precompute_ns = perf_counter_ns() - started

    alice_times: dict[str, int] = defaultdict(int)
    bob_times: dict[str, int] = defaultdict(int)
    alice = Stepper(Type1Alice(keypair, x_a, y_a, params, pool=alice_pool), alice_times)
    bob = Stepper(Type1Bob(keypair.public, x_b, y_b, params, pool=bob_pool), bob_times)
    steppers = {"alice": alice, "bob": bob}
    codec_ns = size = messages = flights = 0
    sent: Counter[str] = Counter()

    started, cpu_started = perf_counter_ns(), time.thread_time_ns()
    queues = {"bob": alice.advance(None), "alice": bob.advance(None)}  # to the receiver
    while queues["bob"] or queues["alice"]:
        for receiver, sender in (("bob", "alice"), ("alice", "bob")):
            batch, queues[receiver] = queues[receiver], []
            if not batch:
                continue
            flights += 1
            for message in batch:
                coded = perf_counter_ns()
                data = message.to_bytes()
                delivered = decode_message(data)
                codec_ns += perf_counter_ns() - coded
                size += len(data)
                messages += 1
                sent[sender] += delivered.ciphertext_count
                queues[sender].extend(steppers[receiver].advance(delivered))
    online_ns, online_cpu_ns = perf_counter_ns() - started, time.thread_time_ns() - cpu_started

    assert alice.output is not None and bob.output is not None, "the exchange stopped early"
    assert alice.output ^ bob.output == int(x >= y), f"wrong comparison for x={x}, y={y}"
    assert alice_pool.online_draws == 0 and bob_pool.online_draws == 0, "the online phase drew r^N"
    assert len(alice_pool) == 0 and len(bob_pool) == 0, "the pool demand is not what the run consumed"
    steps = {key: alice_times[key] + bob_times[key] for key in ("step1", "type3", "conv5_own", "conv4")}
    steps["conv5"] = steps["type3"] + steps["conv5_own"]
    return Run(
        precompute_ns,
        online_ns,
        online_cpu_ns,
        steps,
        sum(alice_times.values()),
        sum(bob_times.values()),
        codec_ns,
        size,
        sent,
        messages,
        flights,
    )


def ms(values: list[int]) -> float:
    return statistics.median(values) / 1e6


def gmp_status() -> str:
    from phe import util

    if not getattr(util, "HAVE_GMP", False):
        return "gmpy2 NOT active (phe uses pure-Python big integers)"
    import gmpy2

    return f"gmpy2 {gmpy2.version()} active (phe.util.HAVE_GMP = True)"


@pytest.mark.parametrize("key_bits", [1024, 2048])
def test_type1_costs(key_bits: int) -> None:
    keygen_ns = []
    for _ in range(RUNS):
        started = perf_counter_ns()
        generate_keypair(key_bits)
        keygen_ns.append(perf_counter_ns() - started)
    keypair = generate_keypair(key_bits)

    results: dict[int, list[Run]] = {}
    for bit_length in BIT_LENGTHS:
        rng = random.Random(INPUT_SEED * 1000 + bit_length)
        one_comparison(keypair, bit_length, rng)  # warm-up, not counted
        results[bit_length] = [one_comparison(keypair, bit_length, rng) for _ in range(RUNS)]

    seed = key_bits == 1024
    lines = [
        f"\nType 1 at {key_bits} bits, median of {RUNS} runs, one thread; {gmp_status()}; "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "| ℓ | online ms [min–max] | online CPU ms | precompute ms | online + precompute ms | Alice / Bob compute ms | "
        "encode+decode ms | bytes | KB | ciphertexts" + (" | seed total ms | seed KB |" if seed else " |"),
        "|---|---|---|---|---|---|---|---|---|---" + ("|---|---|" if seed else "|"),
    ]
    for bit_length, runs in results.items():
        online = [run.online_ns for run in runs]
        total = [run.online_ns + run.precompute_ns for run in runs]
        size = runs[0].bytes_total
        row = (
            f"| {bit_length} | {ms(online):.2f} [{min(online) / 1e6:.2f}–{max(online) / 1e6:.2f}] | "
            f"{ms([run.online_cpu_ns for run in runs]):.2f} | {ms([run.precompute_ns for run in runs]):.1f} | {ms(total):.1f} | "
            f"{ms([run.alice_ns for run in runs]):.2f} / {ms([run.bob_ns for run in runs]):.2f} | "
            f"{ms([run.codec_ns for run in runs]):.2f} | {size:,} | {size / 1000:.2f} | "
            f"{runs[0].ciphertexts['alice'] + runs[0].ciphertexts['bob']} |"
        )
        if seed:
            row += f" {SEED_TOTAL_MS[bit_length]:.1f} | {SEED_KB[bit_length]:.2f} |"
        lines.append(row)
    header = " | ".join(str(bit_length) for bit_length in BIT_LENGTHS)
    lines += [
        "",
        f"per step (ms, median; {'ours / seed' if seed else 'ours'}):",
        f"| step | {header} |",
        "|---|" + "---|" * len(BIT_LENGTHS),
    ]
    for key, label in STEP_ROWS:
        cells = []
        for bit_length, runs in results.items():
            ours = ms([run.steps[key] for run in runs])
            cells.append(f"{ours:.3f} / {SEED_STEPS_MS[key][bit_length]:.3f}" if seed else f"{ours:.3f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        f"\ninitialization (generate_keypair({key_bits})): median {ms(keygen_ns):.1f} ms "
        f"[{min(keygen_ns) / 1e6:.1f}–{max(keygen_ns) / 1e6:.1f}] over {RUNS}"
        + (f"; seed (Table 8.3) {SEED_INIT_MS} ms" if seed else "")
    )
    print("\n".join(lines))

    for bit_length, runs in results.items():
        for run in runs:
            assert run.ciphertexts["alice"] + run.ciphertexts["bob"] == type1_ciphertexts(bit_length)
            assert run.ciphertexts["alice"] == bit_length + 4 and run.ciphertexts["bob"] == bit_length + 2
            assert run.messages == 8 and run.flights == 6


# --------------------------------------------------------------------------- federated GROUP BY, 50 cells

CELLS = 50
THRESHOLD = 20
EPSILON = 1.0
GRANT = 100.0
DATASET, FEDERATION = "clinic", "hospitals"
ANALYST, ANALYST_PASSWORD, PEER_ANALYST = "alice", "alice-federation", "peer_site_a"
SECRET_ENV = "VEIL_FEDERATION_SECRET"
REGIONS = tuple(f"region_{index:02d}" for index in range(CELLS))
READY = re.compile(r"listening on (?P<host>\S+):(?P<port>\d+)")
BYTES = re.compile(r"([\d,]+) bytes exchanged")
REACHED = re.compile(r"(\d+) of (\d+) cells reach k")


def build_two_sites(directory: Path, key_bits: int, seed: int = 7) -> tuple[Path, Path, set[str]]:
    """As proxy/federation/sites.build_sites, with 50 regions: odd ones small at both sites (suppressed),
    even ones large (released). Returns both configs and the large regions."""
    import duckdb
    import numpy as np
    import pandas as pd
    import tomli_w

    from budget.loss import PrivacyLoss
    from proxy.config import load_config
    from proxy.ledger_access import open_ledger
    from proxy.wire.scram import make_scram_verifier

    rng = np.random.default_rng(seed)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    configs = []
    for name in ("a", "b"):
        small = rng.integers(0, THRESHOLD // 4, size=CELLS)
        large = rng.integers(3 * THRESHOLD, 10 * THRESHOLD, size=CELLS)
        counts = {region: int(small[i] if i % 2 else large[i]) for i, region in enumerate(REGIONS)}
        federation: dict[str, Any] = {"dataset": DATASET, "table": "patients", "group_by": ["region"],
                                      "threshold": THRESHOLD, "secret_env": SECRET_ENV, "key_bits": key_bits}  # fmt: skip
        if name == "a":
            federation["peer"] = f"127.0.0.1:{port}"
        else:
            federation.update(listen=f"127.0.0.1:{port}", peer_analyst=PEER_ANALYST, epsilon=EPSILON)
        site = directory / f"site_{name}"
        site.mkdir(parents=True)
        frame = pd.DataFrame(
            {"region": [region for region, count in counts.items() for _ in range(count)]}
        ).reset_index(names="patient_id")
        with duckdb.connect(str(site / "clinic.duckdb")) as connection:
            connection.register("frame", frame)
            connection.execute("CREATE OR REPLACE TABLE patients AS SELECT * FROM frame")
        table = {"privacy_unit": "patient_id", "max_contributions": 1,
                 "columns": {"patient_id": {"type": "integer"},
                             "region": {"type": "text", "public": True, "values": list(REGIONS)}}}  # fmt: skip
        dataset = {"backend": "duckdb", "path": "clinic.duckdb", "default_epsilon": EPSILON,
                   "max_epsilon": GRANT, "answer_cache": False, "tables": {"patients": table}}  # fmt: skip
        document = {"ledger": {"path": "ledger.sqlite"}, "server": {"port": 0},
                    "datasets": {DATASET: dataset}, "federations": {FEDERATION: federation}}  # fmt: skip
        config = site / "veil.toml"
        config.write_text(tomli_w.dumps(document))
        ledger = open_ledger(load_config(config), {}, create=True)
        account = ANALYST if name == "a" else PEER_ANALYST
        ledger.add_analyst(account, make_scram_verifier(ANALYST_PASSWORD))
        ledger.grant(account, DATASET, PrivacyLoss(GRANT))
        configs.append(config)
    return configs[0], configs[1], {region for i, region in enumerate(REGIONS) if i % 2 == 0}


@contextmanager
def served(config: Path, environment: dict[str, str]) -> Iterator[tuple[int, int]]:
    """``veil serve`` on ``config`` (as proxy/cli/federate.py starts it); yields (pid, port)."""
    log = config.with_name("serve.log")
    command = [sys.executable, "-c", "from proxy.cli.main import main; main()", "serve", "--config",
               str(config), "--port", "0", "--log-level", "warning"]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, env=environment
        )
    try:
        deadline = time.monotonic() + 60
        while not (match := READY.search(log.read_text(errors="replace"))):
            assert process.poll() is None, f"veil serve stopped:\n{log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, "veil serve was not ready within 60 s"
            time.sleep(0.05)
        yield process.pid, int(match["port"])
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def cpu_ticks(pid: int) -> int:
    """utime + stime of the whole process (all threads), in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_idle(pids: list[int], *, quiet_s: float = 1.5, timeout_s: float = 300.0) -> float:
    """Wait until no process in ``pids`` used more than 2 ticks of CPU for ``quiet_s``; seconds waited.

    The asking site generates its key and fills its pool in a background thread at start, and both sites
    refill their pools after every query: a query timed during a refill would share the GIL with it.
    """
    started = time.monotonic()
    window = int(quiet_s / 0.25)
    history: list[list[int]] = []
    while time.monotonic() - started < timeout_s:
        history.append([cpu_ticks(pid) for pid in pids])
        if len(history) > window and all(
            now - before <= 2 for now, before in zip(history[-1], history[-1 - window], strict=True)
        ):
            return time.monotonic() - started - quiet_s
        time.sleep(0.25)
    raise AssertionError(f"the servers did not go idle within {timeout_s:g} s")


def local_lockstep_ms(key_bits: int, cells: int, bit_length: int, rng: random.Random) -> float:
    """One thread, pools pre-filled: ``cells`` Type 1 comparisons as the federation runs them (x = noisy
    counts split between the sites, y = k), with run_local; the compute floor of the federated query."""
    keypair = generate_keypair(key_bits)
    params = ComparisonParameters(bit_length, minimum_key_bits=1024)
    alice_demand, bob_demand = type1_pool_demand(bit_length)
    alice_pool, bob_pool = RandomnessPool(keypair.public), RandomnessPool(keypair.public)
    alice_pool.fill(alice_demand * cells)
    bob_pool.fill(bob_demand * cells)
    started = perf_counter_ns()
    for _ in range(cells):
        x_a, x_b = rng.randrange(1 << (bit_length - 1)), rng.randrange(1 << (bit_length - 1))
        result = run_local(
            Type1Alice(keypair, x_a, THRESHOLD, params, pool=alice_pool),
            Type1Bob(keypair.public, x_b, 0, params, pool=bob_pool),
        )
        assert result.alice_output ^ result.bob_output == int(x_a + x_b >= THRESHOLD)
    elapsed = perf_counter_ns() - started
    assert alice_pool.online_draws == 0 and bob_pool.online_draws == 0
    return elapsed / 1e6


@pytest.mark.parametrize("key_bits", [2048, 1024])
def test_federated_group_by_50_cells(tmp_path: Path, key_bits: int) -> None:
    import psycopg

    config_a, config_b, large = build_two_sites(tmp_path, key_bits)
    environment = {**os.environ, SECRET_ENV: os.urandom(24).hex()}
    statement = f"SELECT region, COUNT(*) FROM {FEDERATION} GROUP BY region"
    timings: list[float] = []
    notices: list[str] = []
    exchanged: list[int] = []
    started_at = time.monotonic()
    with served(config_b, environment) as (pid_b, _), served(config_a, environment) as (pid_a, port_a):
        ready_s = time.monotonic() - started_at + wait_idle([pid_a, pid_b])
        conninfo = f"host=127.0.0.1 port={port_a} dbname={DATASET} user={ANALYST} password={ANALYST_PASSWORD}"
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
            for attempt in range(1 + FEDERATED_RUNS):
                refill_s = wait_idle([pid_a, pid_b]) if attempt else 0.0
                notices.clear()
                began = time.perf_counter()
                rows = connection.execute(statement).fetchall()
                timings.append(time.perf_counter() - began)
                joined = " ".join(notices)
                exchanged.append(int(BYTES.search(joined)[1].replace(",", "")))  # type: ignore[index]
                assert len(rows) == CELLS
                released = {region for region, count in rows if count is not None}
                assert released == large, "a large region was suppressed or a small one released"
                assert REACHED.search(joined).groups() == (str(len(large)), str(CELLS))  # type: ignore[union-attr]
    bit_length = THRESHOLD.bit_length() + 1
    per_comparison = type1_ciphertexts(bit_length)
    local_ms = statistics.median(
        local_lockstep_ms(key_bits, CELLS, bit_length, random.Random(INPUT_SEED)) for _ in range(3)
    )
    warm = timings[1:]
    print(
        f"\nFederated GROUP BY over {CELLS} cells at {key_bits} bits (k = {THRESHOLD}, ℓ = {bit_length}, "
        f"{per_comparison} ciphertexts per cell; {len(large)} released, {CELLS - len(large)} suppressed); "
        f"{gmp_status()}; load average {os.getloadavg()[0]:.1f}\n"
        f"| what | value |\n|---|---|\n"
        f"| both servers up, A's key generated and pools filled (CPU idle) | {ready_s:.1f} s |\n"
        f"| first query (B's pool for A's new key still empty: B computes r^N online) | "
        f"{timings[0] * 1000:,.0f} ms |\n"
        f"| query with both pools full, median of {len(warm)} [min–max] | "
        f"**{statistics.median(warm) * 1000:,.0f} ms** [{min(warm) * 1000:,.0f}–{max(warm) * 1000:,.0f}] |\n"
        f"| last wait for both sites' pool refills after a query | {refill_s:.1f} s |\n"
        f"| bytes exchanged between the sites (NOTICE) | {statistics.median(exchanged):,.0f} "
        f"({statistics.median(exchanged) / CELLS:,.0f} per cell) |\n"
        f"| the {CELLS} comparisons alone in one process, pools full (run_local, median of 3) | "
        f"{local_ms:,.0f} ms |"
    )
