/*
 * The local filesystem under its own scheme for the task files of write(df, dest,
 * engine="jvm"): Hadoop's LocalFileSystem (checksums and all), setting permissions with
 * java.nio instead of a chmod child process.
 *
 * Built by scripts/build_jar.sh into src/aiocommit/integrations/spark/aiocommit-spark.jar.
 */
package aiocommit.spark;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local filesystem, without its native library (pyspark ships none), sets each new
 * file's and directory's permission by running {@code chmod} in a child process of Spark's
 * JVM: a partitioned task of ten partition values forks about 30 times (each file, its
 * checksum, each partition directory), which on a loaded machine is most of the task's wall
 * time. This filesystem sets the same permission with one {@code chmod} system call
 * ({@link Files#setPosixFilePermissions}); a permission nio cannot express (sticky, setuid)
 * goes to Hadoop's own.
 *
 * <p>Its scheme is {@value #SCHEME}, for the task attempt's work path only (the committer gives
 * it when the write's configuration maps {@code fs.aiocommitfile.impl} to this class); the
 * paths are the local filesystem's, and the manifest names them as {@code file:} paths.
 */
public class NoForkLocalFileSystem extends LocalFileSystem {
  /** The scheme of the work paths this filesystem serves. */
  public static final String SCHEME = "aiocommitfile";
  /** The configuration key that maps the scheme to this class. */
  public static final String IMPL_KEY = "fs." + SCHEME + ".impl";

  public NoForkLocalFileSystem() {
    super(new Raw());
  }

  @Override
  public String getScheme() {
    return SCHEME;
  }

  /** The raw local filesystem under {@value #SCHEME}, chmod by system call. */
  static final class Raw extends RawLocalFileSystem {
    private static final URI ROOT = URI.create(SCHEME + ":///");

    @Override
    public URI getUri() {
      return ROOT;
    }

    @Override
    public String getScheme() {
      return SCHEME;
    }

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (permission.getStickyBit() || permission.toShort() > 0777) {
        super.setPermission(p, permission);
        return;
      }
      Files.setPosixFilePermissions(
          pathToFile(p).toPath(), PosixFilePermissions.fromString(permission.toString()));
    }
  }
}
