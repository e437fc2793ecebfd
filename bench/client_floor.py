"""The Kafka traffic of `bench/density.py`'s N connectors, made by bare clients and nothing else.

Whatever runs N one-task connectors (Apache Kafka Connect, eosconnect) puts at least this on the
broker and the machine: one transactional producer per low-rate source committing a transaction a
second with its record (MirrorHeartbeat's) and, given `--offsets-topic`, its source offset in the
first transaction (KIP-618 writes records and offsets in one transaction; MirrorHeartbeat's offset
never changes, and a runtime need not write an offset the topic already holds: eosconnect does not,
Kafka Connect does it every time, which adds a partition and a commit marker to each), one
initialised transactional producer per idle source, one consumer per quiet sink, each in its own
group, fetching read_committed. Run beside the busy task instead of the N, it measures what the busy
task keeps when nothing but the N's own Kafka work competes with it: a bound no runtime built on
Kafka's clients exceeds on this machine.

    python bench/client_floor.py BOOTSTRAP --heartbeats H --idle-producers I --consumers C \
        --heartbeat-topic T --quiet-topic Q [--offsets-topic O]

prints `ready` once every client is up, and runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer

#: How long a client may take to join (init_transactions with 400 clients starting at once).
INIT_TIMEOUT_S = 120.0


def heartbeat(
    bootstrap: str,
    topic: str,
    offsets_topic: str | None,
    index: int,
    ready: threading.Barrier,
    stop: threading.Event,
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"floor-{uuid.uuid4().hex}"})
    producer.init_transactions(INIT_TIMEOUT_S)
    ready.wait()
    next_at = time.monotonic() + (index % 100) / 100  # spread over the second, as tasks started apart
    offset_written = offsets_topic is None
    while not stop.wait(max(0.0, next_at - time.monotonic())):
        next_at += 1.0
        producer.begin_transaction()
        producer.produce(topic, key=f"floor-{index}".encode(), value=b"\0" * 32)
        if not offset_written:  # keyed as Connect keys offsets: connector and source partition
            key = f'["floor-{index}",{{"sourceClusterAlias":"src{index}","targetClusterAlias":"target"}}]'
            producer.produce(offsets_topic, key=key.encode(), value=b'{"offset":0}')
        producer.commit_transaction(60)
        offset_written = True


def idle_producer(bootstrap: str, ready: threading.Barrier, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"floor-{uuid.uuid4().hex}"})
    producer.init_transactions(INIT_TIMEOUT_S)
    ready.wait()
    while not stop.wait(1.0):
        producer.poll(0)


def quiet_consumer(bootstrap: str, topic: str, ready: threading.Barrier, stop: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"floor-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    ready.wait()
    try:
        while not stop.is_set():
            consumer.poll(1.0)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("--heartbeats", type=int, default=0)
    parser.add_argument("--idle-producers", type=int, default=0)
    parser.add_argument("--consumers", type=int, default=0)
    parser.add_argument("--heartbeat-topic", default="floor-heartbeats")
    parser.add_argument("--quiet-topic", default="floor-quiet")
    parser.add_argument("--offsets-topic", help="write each heartbeat's source offset here (once)")
    args = parser.parse_args()
    stop = threading.Event()
    ready = threading.Barrier(args.heartbeats + args.idle_producers + args.consumers + 1)
    threads = (
        [
            threading.Thread(
                target=heartbeat,
                args=(args.bootstrap, args.heartbeat_topic, args.offsets_topic, i, ready, stop),
            )
            for i in range(args.heartbeats)
        ]
        + [
            threading.Thread(target=idle_producer, args=(args.bootstrap, ready, stop))
            for _ in range(args.idle_producers)
        ]
        + [
            threading.Thread(target=quiet_consumer, args=(args.bootstrap, args.quiet_topic, ready, stop))
            for _ in range(args.consumers)
        ]
    )
    for thread in threads:
        thread.daemon = True
        thread.start()
    ready.wait(INIT_TIMEOUT_S)
    print("ready", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    for thread in threads:
        thread.join(10)
    os._exit(0)  # librdkafka's handles are not worth closing one by one at exit


if __name__ == "__main__":
    main()
