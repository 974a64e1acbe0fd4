"""What TLS and SASL cost: produce and consume through a SASL_SSL listener against a PLAINTEXT one.

One kafka-edu broker (`kafka-edu server-start`) listens on both, so the log, the page cache and the
handler threads are the same and only the channel differs: on SASL_SSL every byte is encrypted by
the broker (Python's `ssl`, OpenSSL underneath) and fetches cannot use `sendfile`, which a PLAINTEXT
fetch does. The client is confluent-kafka on both: it logs in with SASL/PLAIN once per connection,
so the login is not part of the figure, the encryption is.

Each repeat produces N records of each size to a fresh topic through one listener and reads them
back, then does the same through the other; the listeners take turns going first. The first repeat
only warms the page cache and connections and is discarded. Rates are medians of the kept repeats;
each ratio (SASL_SSL / PLAINTEXT) is the median of the per-repeat ratios.

    python benchmarks/security_cost.py [--records 200000] [--sizes 100,1024] [--repeats 3]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat"), str(ROOT / "tests" / "security")]

from _certs import make_certs  # noqa: E402
from _summary import report  # noqa: E402
from _timed_send import time_confluent_produces  # noqa: E402
from broker_process import BrokerProcess  # noqa: E402
from external import free_port  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'


def client_configs(broker: BrokerProcess, sasl_port: int, certs: Path) -> dict[str, dict]:
    return {"PLAINTEXT": {"bootstrap.servers": broker.bootstrap},
            "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_SSL",
                         "sasl.mechanism": "PLAIN", "sasl.username": "bench", "sasl.password": "bench-secret",
                         "ssl.ca.location": str(certs / "ca.pem")}}


def produce(config: dict, topic: str, records: int, size: int) -> float:
    producer = Producer({**config, "acks": 1, "linger.ms": 50, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    return records / time_confluent_produces(producer, topic, records, b"x" * size, partition=0)


def consume(config: dict, topic: str, records: int) -> float:
    """Records/s of a fresh consumer reading the topic's partition 0 from the start (connected beforehand)."""
    consumer = Consumer({**config, "group.id": "bench", "enable.auto.commit": False, "fetch.queue.backoff.ms": 0})
    try:
        consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        seen = 0
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        while seen < records:
            batch = consumer.consume(min(10_000, records - seen), 5)
            if not batch:
                raise RuntimeError(f"consumer stalled at {seen}/{records}")
            seen += sum(1 for m in batch if not m.error())
        return records / (time.perf_counter() - started)
    finally:
        consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("openssl") is None:
        print("the openssl CLI is needed to make the broker's certificate", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        certs = make_certs(Path(tmp))
        sasl_port = free_port()
        broker = BrokerProcess(Path(tmp) / "broker", {
            "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker-keystore.pem")},
            extra_listeners=(f"SASL_SSL://127.0.0.1:{sasl_port}",)).start()
        configs = client_configs(broker, sasl_port, certs)
        try:
            print(f"{'case':<16}{'PLAINTEXT rec/s':>17}{'SASL_SSL rec/s':>16}{'ratio':>8}")
            for size in (int(s) for s in args.sizes.split(",")):
                runs: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
                for repeat in range(args.repeats + 1):
                    order = list(configs) if repeat % 2 else list(reversed(configs))
                    for name in order:
                        topic = f"bench-{name.lower()}-{size}-{repeat}"
                        rates = (produce(configs[name], topic, args.records, size),
                                 consume(configs[name], topic, args.records))
                        if repeat:
                            runs[name].append(rates)
                for phase, index in (("produce", 0), ("consume", 1)):
                    plain = statistics.median(r[index] for r in runs["PLAINTEXT"])
                    secured = statistics.median(r[index] for r in runs["SASL_SSL"])
                    ratio = statistics.median(s[index] / p[index]
                                              for s, p in zip(runs["SASL_SSL"], runs["PLAINTEXT"], strict=True))
                    case = f"{phase} {size} B"
                    print(f"{case:<16}{plain:>17,.0f}{secured:>16,.0f}{ratio:>8.2f}", flush=True)
                    report("security_cost", f"SASL_SSL / PLAINTEXT, {case}", ratio, None,
                           plaintext_rate=plain, sasl_ssl_rate=secured, unit_rate="records/s")
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
