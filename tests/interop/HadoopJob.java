import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter;
import org.apache.hadoop.mapreduce.task.JobContextImpl;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;

/**
 * Hadoop's own ManifestCommitter on the local filesystem, for the interop tests
 * (tests/interop/test_hadoop_names.py). Run with the Java source launcher and the
 * Hadoop client jars inside the pyspark wheel:
 *
 *   setup  DEST JOB_ID               setupJob
 *   task   DEST JOB_ID TASK NAME...  setupJob unless the job is set up; setupTask; write
 *                                    each NAME (relative; its content is the name, UTF-8)
 *                                    under the work path; commitTask
 *   commit DEST JOB_ID               commitJob (the job may have been written by aiocommit)
 *
 * Exit 0 on success; a failure prints Hadoop's exception and exits 1.
 */
public final class HadoopJob {

  private HadoopJob() {
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: HadoopJob setup|task|commit DEST JOB_ID [TASK NAME...]");
      System.exit(2);
    }
    Configuration conf = new Configuration();
    conf.set("mapreduce.fileoutputcommitter.cleanup.skipped", "false");
    Path dest = new Path("file", null, new File(args[1]).getAbsolutePath());
    JobID job = JobID.forName(args[2]);
    try {
      switch (args[0]) {
      case "setup":
        committer(conf, dest, job, 0).setupJob(new JobContextImpl(conf, job));
        break;
      case "task":
        task(conf, dest, job, Integer.parseInt(args[3]), args);
        break;
      case "commit":
        JobContext context = new JobContextImpl(conf, job);
        committer(conf, dest, job, 0).commitJob(context);
        break;
      default:
        System.err.println("unknown mode " + args[0]);
        System.exit(2);
      }
    } catch (Exception e) {
      e.printStackTrace();
      System.exit(1);
    }
    System.exit(0);
  }

  static ManifestCommitter committer(Configuration conf, Path dest, JobID job, int task)
      throws Exception {
    TaskAttemptID attempt = new TaskAttemptID(new TaskID(job, TaskType.MAP, task), 0);
    return new ManifestCommitter(dest, new TaskAttemptContextImpl(conf, attempt));
  }

  static void task(Configuration conf, Path dest, JobID job, int task, String[] args)
      throws Exception {
    TaskAttemptID attempt = new TaskAttemptID(new TaskID(job, TaskType.MAP, task), 0);
    TaskAttemptContext context = new TaskAttemptContextImpl(conf, attempt);
    ManifestCommitter committer = new ManifestCommitter(dest, context);
    java.nio.file.Path jobDir = Paths.get(dest.toUri().getPath(), "_temporary", job.toString());
    if (!Files.isDirectory(jobDir)) {
      committer.setupJob(new JobContextImpl(conf, job));
    }
    committer.setupTask(context);
    // the work path as a local file: the URI's decoded path
    java.nio.file.Path work = Paths.get(committer.getWorkPath().toUri().getPath());
    for (int i = 4; i < args.length; i++) {
      java.nio.file.Path file = work.resolve(args[i]);
      Files.createDirectories(file.getParent());
      Files.write(file, args[i].getBytes(StandardCharsets.UTF_8));
    }
    committer.commitTask(context);
  }
}
