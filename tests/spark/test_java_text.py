"""``values.java_float_string`` against Java itself: the JVM Spark runs on (``JAVA_HOME``
or ``java`` on the PATH) prints ``Double.toString``/``Float.toString`` of tens of
thousands of doubles and floats, and aiocommit must print the same text for that Java's
version (Java 17's digits differ from Java 19+'s, see ``java_float_string``)."""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from aiocommit.integrations.spark.values import java_float_string

pytestmark = pytest.mark.spark  # starts a JVM (java) itself

PROGRAM = """\
import java.io.*;
public class JavaText {
  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    StringBuilder out = new StringBuilder(System.getProperty("java.specification.version"));
    out.append('\\n');
    for (String line; (line = in.readLine()) != null; ) {
      String bits = line.substring(1);
      if (line.startsWith("f")) {
        out.append(Float.toString(Float.intBitsToFloat(Integer.parseUnsignedInt(bits, 16))));
      } else {
        out.append(Double.toString(Double.longBitsToDouble(Long.parseUnsignedLong(bits, 16))));
      }
      out.append('\\n');
    }
    System.out.print(out);
  }
}
"""


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    assert found, "Spark needs Java: set JAVA_HOME or put java on the PATH"
    return found


def doubles(rng: random.Random, count: int) -> list[float]:
    values = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(count)]
    values += [k * 5e-324 for k in range(1, 400)]  # subnormals with one or two digits
    values += [float(rng.randrange(2**53, 2**63)) for _ in range(count // 10)]
    values += [float(f"{m}e{e}") for e in range(-325, 309) for m in (1, 2, 5, 9.5, 3.3)]
    values += [rng.randrange(1, 10**6) / 10 ** rng.randrange(0, 9) for _ in range(count // 10)]
    return values


def floats(rng: random.Random, count: int) -> list[float]:
    values = [struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0] for _ in range(count)]
    values += [struct.unpack("<f", struct.pack("<I", k))[0] for k in range(1, 400)]
    values += [float(rng.randrange(2**24, 2**40)) for _ in range(count // 10)]
    return values


def test_doubles_and_floats_print_as_this_java(tmp_path: Path) -> None:
    rng = random.Random(19)
    double_values = doubles(rng, 20_000)
    float_values = floats(rng, 10_000)
    lines = [f"d{struct.unpack('<Q', struct.pack('<d', v))[0]:x}" for v in double_values]
    lines += [f"f{struct.unpack('<I', struct.pack('<f', v))[0]:x}" for v in float_values]
    source = tmp_path / "JavaText.java"
    source.write_text(PROGRAM)
    done = subprocess.run(
        [java(), str(source)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    version, *printed = done.stdout.splitlines()
    major = int(version.split(".")[1] if version.startswith("1.") else version)
    ours = [java_float_string(v, before_java_19=major < 19) for v in double_values]
    ours += [java_float_string(v, single=True, before_java_19=major < 19) for v in float_values]
    assert len(printed) == len(ours)
    differing = [(line, a, b) for line, a, b in zip(lines, ours, printed, strict=True) if a != b]
    assert not differing, (major, len(differing), differing[:10])
    # and the other Java's rule differs on some of them (the choice matters)
    other = [java_float_string(v, before_java_19=major >= 19) for v in double_values]
    assert other != ours[: len(double_values)]
