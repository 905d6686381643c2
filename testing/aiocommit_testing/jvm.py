"""The options of the short-lived JVMs the tests and the stress harness start (Spark
sessions, a standalone cluster, streaming queries, Hadoop's job runner)."""

from __future__ import annotations

#: the JIT's first tier and the serial collector: each of these JVMs lives seconds to
#: minutes running code compiled once and run a few times, so on two cores the
#: optimising tier's compile threads and a parallel collector cost more than they save
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
