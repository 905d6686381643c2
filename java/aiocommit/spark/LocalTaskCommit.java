/*
 * A task attempt's commit on the local filesystem: Hadoop's ManifestCommitter task commit
 * (CommitTaskStage) without its stage machinery. Part of aiocommit's jar (scripts/build_jar.sh).
 */
package aiocommit.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.statistics.IOStatisticsSnapshot;
import org.apache.hadoop.fs.statistics.MeanStatistic;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.DirEntry;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.EntryStatus;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.FileEntry;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.impl.ManifestCommitterSupport;

/**
 * Saves a task attempt's manifest as Hadoop's ManifestCommitter does on the local filesystem,
 * with the same content: the attempt directory's files (Hadoop's listing, which leaves out
 * checksum files) with their destinations, each subdirectory with its destination's state,
 * and the task's statistics (file count and size, directory count and depth, the commit's
 * duration). The manifest is written to the attempt's temporary manifest path in one write,
 * as {@link LocalManifestOperations} does, then renamed over {@code manifests/TASK-manifest.json}
 * in one atomic rename (the last attempt to commit wins, as with Hadoop's delete-then-rename).
 *
 * <p>Why: Hadoop's task commit builds a committer configuration, a statistics store of about 80
 * entries and a stage per step, about 2 ms of a task's CPU against ~0.6 ms for Spark's own
 * FileOutputCommitter: a write of 200 tiny tasks paid ~0.3 s for it on two cores.
 */
final class LocalTaskCommit {
  private final FileSystem fs;
  private final Path destination;
  private final String jobId;
  private final int jobAttemptNumber;
  private final Path taskAttemptDir;
  private final Path manifestDir;

  private LocalTaskCommit(
      FileSystem fs, Path destination, String jobId, int jobAttemptNumber, Path taskAttemptDir,
      Path manifestDir) {
    this.fs = fs;
    this.destination = destination;
    this.jobId = jobId;
    this.jobAttemptNumber = jobAttemptNumber;
    this.taskAttemptDir = taskAttemptDir;
    this.manifestDir = manifestDir;
  }

  /** The task side of a task attempt's committer on the local filesystem; null for a job's
   * committer (no attempt) or another filesystem. The directories are Hadoop's: {@code
   * DEST/_temporary/JOB/NN/tasks/ATTEMPT} and {@code DEST/_temporary/JOB/NN/manifests}. */
  static LocalTaskCommit forTask(Path outputPath, TaskAttemptContext context) throws IOException {
    TaskAttemptID attempt = context.getTaskAttemptID();
    if (attempt == null) {
      return null;
    }
    FileSystem fs = outputPath.getFileSystem(context.getConfiguration());
    if (!(fs instanceof LocalFileSystem)) {
      return null;
    }
    Path destination = fs.makeQualified(outputPath);
    String jobId =
        ManifestCommitterSupport.buildJobUUID(context.getConfiguration(), context.getJobID())
            .getLeft();
    int jobAttemptNumber = ManifestCommitterSupport.getAppAttemptId((JobContext) context);
    ManifestCommitterSupport.AttemptDirectories dirs =
        new ManifestCommitterSupport.AttemptDirectories(destination, jobId, jobAttemptNumber);
    return new LocalTaskCommit(
        fs, destination, jobId, jobAttemptNumber, dirs.getTaskAttemptPath(attempt.toString()),
        dirs.getTaskManifestDir());
  }

  Path taskAttemptDir() {
    return taskAttemptDir;
  }

  /** Where the task's writers write: the attempt directory, under {@link
   * NoForkLocalFileSystem}'s scheme when the write's configuration maps it (no child process
   * per file and directory), else as a {@code file:} path. */
  Path workPath(org.apache.hadoop.conf.Configuration conf) {
    if (!NoForkLocalFileSystem.class.getName().equals(conf.getTrimmed(NoForkLocalFileSystem.IMPL_KEY))) {
      return taskAttemptDir;
    }
    return new Path(NoForkLocalFileSystem.SCHEME, null, taskAttemptDir.toUri().getPath());
  }

  /**
   * Makes the attempt directory (and its parents) with plain directory calls. Hadoop's local
   * filesystem, without its native library (pyspark ships none), sets a new directory's
   * permission by running {@code chmod} in a child process: the writer's first file would
   * fork Spark's JVM once for the directory (as Spark's own writer does per task), besides
   * once each for the file and its checksum. The mode is the process's default (0777 less the
   * umask), as Hadoop's default directory permission with its default umask; the directory is
   * temporary and its files are renamed out of it.
   */
  void setUp() throws IOException {
    Files.createDirectories(((LocalFileSystem) fs).pathToFile(taskAttemptDir).toPath());
  }

  /** Lists the attempt directory and saves the manifest. */
  void commit(TaskAttemptContext context) throws IOException {
    long started = System.currentTimeMillis();
    TaskAttemptID attempt = context.getTaskAttemptID();
    TaskManifest manifest = new TaskManifest();
    manifest.setJobId(jobId);
    manifest.setJobAttemptNumber(jobAttemptNumber);
    manifest.setTaskID(attempt.getTaskID().toString());
    manifest.setTaskAttemptID(attempt.toString());
    manifest.setTaskAttemptDir(taskAttemptDir.toString());
    // no directory: a task that wrote no file (Hadoop's scan of the empty directory: depth 1)
    int depth = fs.exists(taskAttemptDir) ? scan(manifest, taskAttemptDir, destination, 0) : 1;
    long bytes = 0;
    for (FileEntry entry : manifest.getFilesToCommit()) {
      bytes += entry.getSize();
    }
    IOStatisticsSnapshot statistics = new IOStatisticsSnapshot();
    sample(statistics, "committer_task_file_count", manifest.getFilesToCommit().size());
    sample(statistics, "committer_task_file_size", bytes);
    sample(statistics, "committer_task_directory_count", manifest.getDestDirectories().size());
    sample(statistics, "committer_task_directory_depth", depth);
    duration(statistics, "task_stage_commit", System.currentTimeMillis() - started);
    manifest.setIOStatistics(statistics);
    save(manifest, attempt);
  }

  /** Hadoop's directory scan: files first, then each subdirectory (recorded with the
   * state of its destination); the depth below {@code dir}, 1 for a directory of files. */
  private int scan(TaskManifest manifest, Path dir, Path destDir, int depth) throws IOException {
    int below = 0;
    FileStatus[] listing = fs.listStatus(dir);
    if (depth > 0) {
      manifest.addDirectory(DirEntry.dirEntry(destDir, destinationState(destDir), depth));
    }
    for (FileStatus status : listing) {
      if (status.isFile()) {
        Path dest = new Path(destDir, status.getPath().getName());
        manifest.addFileToCommit(new FileEntry(status.getPath(), dest, status.getLen(), null));
      }
    }
    for (FileStatus status : listing) {
      if (status.isDirectory()) {
        Path sub = new Path(destDir, status.getPath().getName());
        below = Math.max(below, scan(manifest, status.getPath(), sub, depth + 1));
      }
    }
    return 1 + below;
  }

  private EntryStatus destinationState(Path destDir) throws IOException {
    try {
      return EntryStatus.toEntryStatus(fs.getFileStatus(destDir));
    } catch (FileNotFoundException e) {
      return EntryStatus.not_found;
    }
  }

  private void save(TaskManifest manifest, TaskAttemptID attempt) throws IOException {
    LocalFileSystem local = (LocalFileSystem) fs;
    Path temporary =
        ManifestCommitterSupport.manifestTempPathForTaskAttempt(manifestDir, attempt.toString());
    Path saved =
        ManifestCommitterSupport.manifestPathForTask(manifestDir, attempt.getTaskID().toString());
    LocalManifestOperations.write(local.pathToFile(temporary).toPath(), manifest, true);
    Files.move(
        local.pathToFile(temporary).toPath(),
        local.pathToFile(saved).toPath(),
        StandardCopyOption.ATOMIC_MOVE);
  }

  private static void sample(IOStatisticsSnapshot statistics, String key, long value) {
    statistics.minimums().put(key, value);
    statistics.maximums().put(key, value);
    statistics.meanStatistics().put(key, new MeanStatistic(1, value));
    if (value != 0) {
      statistics.counters().put(key, value);
    }
  }

  private static void duration(IOStatisticsSnapshot statistics, String key, long millis) {
    statistics.counters().put(key, 1L);
    statistics.minimums().put(key + ".min", millis);
    statistics.maximums().put(key + ".max", millis);
    statistics.meanStatistics().put(key + ".mean", new MeanStatistic(1, millis));
  }
}
