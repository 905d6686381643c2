/*
 * aiocommit's committer for Spark's own file writers (parquet, csv, json, orc, text):
 * Hadoop's ManifestCommitter does the task side, and the job commit is left to aiocommit,
 * which commits the job's manifests from Python after the Spark job has returned.
 *
 * Built by scripts/build_jar.sh into src/aiocommit/integrations/spark/aiocommit-spark.jar;
 * tests/spark/test_jvm_engine.py checks that the jar holds this source's classes.
 */
package aiocommit.spark;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.impl.ManifestStoreOperations;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.impl.ManifestStoreOperationsThroughFileSystem;

/**
 * Hadoop's ManifestCommitter without its job commit.
 *
 * <p>Spark's writers put a task's files into the committer's work path only when the committer
 * is a FileOutputCommitter (elsewhere they write straight into the destination), so this class
 * extends FileOutputCommitter and hands every step to a ManifestCommitter:
 *
 * <ul>
 *   <li>job set-up: creates {@code DEST/_temporary/JOB/00/manifests};
 *   <li>tasks write into {@code DEST/_temporary/JOB/00/tasks/ATTEMPT/} (the work path; made at
 *       task set-up on the local filesystem, elsewhere by the writers' first file, as with
 *       FileOutputCommitter);
 *   <li>task commit (the attempt Spark's commit coordinator allowed): the attempt's manifest,
 *       saved as {@code manifests/TASK-manifest.json}. On the local filesystem by
 *       {@link LocalTaskCommit} (the same manifest, without the stage machinery, ~0.2 ms instead
 *       of ~2 ms per task); elsewhere by Hadoop's task commit stage;
 *   <li>job commit: nothing. The manifests stay for aiocommit's job commit;
 *   <li>task and job abort: Hadoop's, which delete the attempt's or the job's directory.
 * </ul>
 *
 * <p>JOB is the write's option {@value #JOB_ID} (aiocommit sets it to a job ID of its own), so
 * that the caller knows which job to commit; it replaces Spark's write UUID for the manifest
 * committer. A write without it fails at job set-up, before any task runs.
 */
public class DeferredManifestCommitter extends FileOutputCommitter {
  /** The write option that names the job directory. */
  public static final String JOB_ID = "aiocommit.jvm.jobId";

  /** Where the manifest committer takes the job ID from (Spark sets it per write). */
  static final String SPARK_WRITE_UUID = "spark.sql.sources.writeJobUUID";

  private final Path outputPath;
  private final TaskAttemptContext context;
  /** The task side on the local filesystem; null for a job's committer or another store. */
  private final LocalTaskCommit localTask;
  /** Hadoop's committer, made when a step needs it (a task commit on the local filesystem
   * does not: building it costs about as much as that commit). */
  private ManifestCommitter manifest;

  public DeferredManifestCommitter(Path outputPath, TaskAttemptContext context)
      throws IOException {
    super(withJobId(outputPath, context), context);
    this.outputPath = outputPath;
    this.context = context;
    localTask = LocalTaskCommit.forTask(outputPath, context);
  }

  private ManifestCommitter manifest() throws IOException {
    if (manifest == null) {
      manifest = new LeanManifestCommitter(outputPath, context);
    }
    return manifest;
  }

  /** Hadoop's ManifestCommitter, saving manifests through {@link LocalManifestOperations}
   * on the local filesystem (where no store supplies operations of its own). */
  static final class LeanManifestCommitter extends ManifestCommitter {
    LeanManifestCommitter(Path outputPath, TaskAttemptContext context) throws IOException {
      super(outputPath, context);
    }

    @Override
    protected ManifestStoreOperations createManifestStoreOperations() throws IOException {
      ManifestStoreOperations chosen = super.createManifestStoreOperations();
      if (chosen.getClass() != ManifestStoreOperationsThroughFileSystem.class) {
        return chosen; // a store's own operations (ABFS's)
      }
      FileSystem fs = ((ManifestStoreOperationsThroughFileSystem) chosen).getFileSystem();
      if (!(fs instanceof LocalFileSystem)) {
        return chosen;
      }
      LocalManifestOperations local = new LocalManifestOperations();
      local.bindToFileSystem(fs, getOutputPath());
      return local;
    }
  }

  /** Sets the manifest committer's job ID to the write's {@value #JOB_ID}. */
  private static Path withJobId(Path outputPath, TaskAttemptContext context) {
    Configuration conf = context.getConfiguration();
    String jobId = conf.getTrimmed(JOB_ID, "");
    if (jobId.isEmpty()) {
      throw new IllegalArgumentException(
          DeferredManifestCommitter.class.getName() + " needs the write option " + JOB_ID
              + ": write through aiocommit.integrations.spark.write(df, dest, engine=\"jvm\")");
    }
    conf.set(SPARK_WRITE_UUID, jobId);
    return outputPath;
  }

  @Override
  public Path getWorkPath() throws IOException {
    return localTask != null
        ? localTask.workPath(context.getConfiguration())
        : manifest().getWorkPath();
  }

  @Override
  public void setupJob(JobContext context) throws IOException {
    manifest().setupJob(context);
  }

  /** On the local filesystem, makes the work path (see {@link LocalTaskCommit#setUp});
   * elsewhere nothing: the writers' first file creates it, as with FileOutputCommitter. */
  @Override
  public void setupTask(TaskAttemptContext context) throws IOException {
    if (localTask != null) {
      localTask.setUp();
    }
  }

  @Override
  public boolean needsTaskCommit(TaskAttemptContext context) {
    return true;
  }

  @Override
  public void commitTask(TaskAttemptContext context) throws IOException {
    if (localTask != null) {
      localTask.commit(context);
      return;
    }
    ManifestCommitter manifest = manifest();
    Path work = manifest.getWorkPath();
    FileSystem fs = work.getFileSystem(context.getConfiguration());
    if (!fs.exists(work)) { // a task that wrote no file: its manifest lists none
      fs.mkdirs(work);
    }
    manifest.commitTask(context);
  }

  @Override
  public void abortTask(TaskAttemptContext context) throws IOException {
    manifest().abortTask(context);
  }

  /** Nothing: aiocommit commits the job's manifests after the Spark job returns. */
  @Override
  public void commitJob(JobContext context) {}

  @Override
  @Deprecated
  public void cleanupJob(JobContext context) {}

  @Override
  public void abortJob(JobContext context, JobStatus.State state) throws IOException {
    manifest().abortJob(context, state);
  }

  @Override
  public boolean isCommitJobRepeatable(JobContext context) {
    return false;
  }

  @Override
  @Deprecated
  public boolean isRecoverySupported() {
    return false;
  }
}
