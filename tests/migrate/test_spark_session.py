"""The one SparkSession builder (migrate/spark.py): in local mode the driver's JVM, which
also runs the executors, compiles with C1 only (LOCAL_JIT_OPTION), as the JVM running the
tests shows in its own arguments."""

from __future__ import annotations

import pytest

from waku_legacy.migrate.spark import LOCAL_JIT_OPTION, with_local_jit

pytestmark = [pytest.mark.spark]


def test_the_local_jvm_runs_with_c1_only(spark) -> None:
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert LOCAL_JIT_OPTION in arguments, arguments
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert LOCAL_JIT_OPTION in options


def test_only_local_mode_and_only_unless_the_operator_chose() -> None:
    key = "spark.driver.extraJavaOptions"
    assert with_local_jit("local[2]", {})[key] == LOCAL_JIT_OPTION
    assert with_local_jit("local[*]", {key: "-Dx=1"})[key] == f"-Dx=1 {LOCAL_JIT_OPTION}"
    assert with_local_jit("spark://10.0.0.1:7077", {}) == {}
    chosen = {key: "-XX:-TieredCompilation"}
    assert with_local_jit("local[2]", chosen) == chosen
