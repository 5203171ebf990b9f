"""One local-mode Spark session with Delta Lake (pyspark + delta-spark from
the spark venv): one core, a small heap, no UI, one snapshot partition (the
tables are small; the defaults cost tens of seconds per query on two
cores). The delta-spark jars come through Ivy, cached in
$FLIGHTLINE_SPARK_IVY."""
import atexit
import os
import shutil
import tempfile

from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession


def spark_session():
    ivy = os.environ["FLIGHTLINE_SPARK_IVY"]
    warehouse = tempfile.mkdtemp(prefix="flightline-spark-")  # unused: path tables only
    atexit.register(shutil.rmtree, warehouse, True)
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("flightline-delta-interop")
        .config("spark.driver.memory", "768m")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .config("spark.jars.ivy", ivy)
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        # The interop test runs Spark's own VACUUM with a zero retention.
        .config("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    )
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
