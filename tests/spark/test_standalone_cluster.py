"""A real Spark cluster: a standalone master and worker started with the pinned pyspark's
spark-class, and the chapter's pipeline submitted to it with spark-submit. Batch writes and reads,
and the streaming query, then run in executor JVMs with their own Python workers: everything the
data source ships to them must pickle and import there."""
from __future__ import annotations

import json

import pytest
from _spark_helpers import require_spark

pytestmark = pytest.mark.spark


def test_pipeline_on_a_standalone_cluster(servers, tmp_path):
    require_spark()
    from kafka_edu.spark import clickstream
    from kafka_edu.spark.standalone import StandaloneCluster
    cluster = StandaloneCluster(tmp_path / "cluster", cores=2).start()
    try:
        assert cluster.master_url.startswith("spark://127.0.0.1:")
        done = cluster.submit(clickstream.__file__, "--bootstrap-servers", servers, "--records", "6000",
                              "--step-ms", "100", "--max-offsets-per-trigger", "2000", "--partitions", "3",
                              "--work-dir", str(tmp_path / "run"), "--prefix", "standalone-")
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        cluster.stop()
    assert result["master"] == cluster.master_url
    assert result["records"] == 6000 and result["micro-batches"] >= 3
    assert result["windows"] > 0 and result["parquet rows"] == result["topic rows"] == result["windows"]
    assert result["parquet mismatches"] == 0 and result["topic mismatches"] == 0
