/*
 * The manifest committer's store operations on the local filesystem, with a manifest saved
 * in one plain write. Part of aiocommit's jar (scripts/build_jar.sh).
 */
package aiocommit.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.StandardOpenOption;

import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.statistics.IOStatisticsSnapshot;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.AbstractManifestData;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.impl.ManifestStoreOperationsThroughFileSystem;
import org.apache.hadoop.util.JsonSerialization;

/**
 * Hadoop's store operations through the filesystem, except that on the local filesystem a
 * task manifest is saved with one write of its JSON: no checksum file, no permission change,
 * compact, without the statistics that hold nothing, through one serializer for all.
 *
 * <p>Why: Hadoop's local filesystem sets each new file's permission (the manifest's and its
 * {@code .crc} file's) by running {@code chmod} in a child process when Hadoop's native library
 * is absent, as in pyspark's distribution. Forking Spark's JVM twice per task commit cost more
 * than the rest of the task commit.
 *
 * <p>The JSON has Hadoop's fields and values (the same serializer, not pretty-printed). A file without
 * a {@code .crc} is read unverified by Hadoop's local filesystem, and its rename drops a stale
 * {@code .crc} at the destination, so Hadoop's job commit and aiocommit's read the manifest as
 * they read Hadoop's own. The save is still to a temporary path, then renamed (by the caller,
 * Hadoop's task commit stage), so a manifest appears whole or not at all.
 */
public class LocalManifestOperations extends ManifestStoreOperationsThroughFileSystem {

  private static final OpenOption[] REPLACE = {
    StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE
  };
  private static final OpenOption[] CREATE_NEW = {
    StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE
  };

  /** One serializer, compact, for every task manifest of the JVM. Hadoop's {@code toBytes()} makes
   * a new one (a new Jackson mapper, which introspects the manifest's classes again) per call,
   * which took most of a task commit's CPU; Jackson's mappers are safe to share once configured. */
  private static final JsonSerialization<TaskManifest> TASK_MANIFESTS =
      new JsonSerialization<>(TaskManifest.class, false, false);

  @Override
  public <T extends AbstractManifestData<T>> void save(T data, Path path, boolean overwrite)
      throws IOException {
    FileSystem fs = getFileSystem();
    if (!(fs instanceof LocalFileSystem)) {
      super.save(data, path, overwrite);
      return;
    }
    java.nio.file.Path file = ((LocalFileSystem) fs).pathToFile(path).toPath();
    if (data instanceof TaskManifest) {
      write(file, (TaskManifest) data, overwrite);
    } else {
      write(file, data.toBytes(), overwrite);
    }
  }

  /** Saves a task manifest at {@code file} in one write (see the class comment). */
  static void write(java.nio.file.Path file, TaskManifest manifest, boolean overwrite)
      throws IOException {
    withoutEmptyStatistics(manifest.getIOStatistics());
    write(file, TASK_MANIFESTS.toBytes(manifest), overwrite);
  }

  private static void write(java.nio.file.Path file, byte[] json, boolean overwrite)
      throws IOException {
    try {
      Files.write(file, json, overwrite ? REPLACE : CREATE_NEW);
    } catch (NoSuchFileException e) { // no parent directory yet: made, as Hadoop's create makes it
      Files.createDirectories(file.getParent());
      Files.write(file, json, overwrite ? REPLACE : CREATE_NEW);
    }
  }

  /**
   * Drops the statistics that hold nothing: zero counters and gauges, unset minimums and
   * maximums (-1), means of no sample. Hadoop's and aiocommit's aggregation treat a missing
   * statistic as these values, so the job's totals are the same; the manifest shrinks from
   * ~19 KB (about 80 statistics of which a task sets 7) to ~2 KB, which the job commit reads
   * once per task.
   */
  static void withoutEmptyStatistics(IOStatisticsSnapshot statistics) {
    if (statistics == null) {
      return;
    }
    statistics.counters().values().removeIf(value -> value == 0L);
    statistics.gauges().values().removeIf(value -> value == 0L);
    statistics.minimums().values().removeIf(value -> value < 0L);
    statistics.maximums().values().removeIf(value -> value < 0L);
    statistics.meanStatistics().values().removeIf(mean -> mean.getSamples() == 0L);
  }
}
