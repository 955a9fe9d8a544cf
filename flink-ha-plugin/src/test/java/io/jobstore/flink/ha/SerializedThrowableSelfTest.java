package io.jobstore.flink.ha;

import org.apache.flink.client.cli.CliFrontend;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.rest.handler.async.AsynchronousOperationResult;
import org.apache.flink.runtime.rest.messages.job.savepoints.SavepointInfo;
import org.apache.flink.runtime.rest.util.RestMapperUtils;
import org.apache.flink.util.ExceptionUtils;
import org.apache.flink.util.InstantiationUtil;
import org.apache.flink.util.SerializedThrowable;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JavaType;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.config.Configurator;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.ObjectStreamClass;
import java.io.ObjectStreamConstants;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Self-test of jobstore's {@code serialized-throwable} (written in Rust by src/flink/throwable.rs)
 * with Flink 2.3's own classes. Every fixture of tests/data/serialized-throwable (or of the folder
 * given as the first argument) holds the inputs {@code class}, {@code message}, {@code
 * stack-trace} and the Rust function's output {@code serialized-throwable}. For each one it
 * checks that:
 *
 * <ul>
 *   <li>Flink's {@code InstantiationUtil} decodes it to a {@code SerializedThrowable} with the
 *       class, message, toString and stack trace Flink's own constructor gives, and Java writes
 *       the decoded object back to the very same bytes;
 *   <li>{@code deserializeError} falls back to the SerializedThrowable itself (no JVM has the
 *       original class), and {@code serializedException} is, byte for byte, what Java writes for
 *       an exception of that class name with that message;
 *   <li>Flink's REST mapper reads it inside a savepoint status answer, and Flink's command-line
 *       client ({@code CliFrontend}, run in this process against a small HTTP server answering
 *       like jobstore) prints "Caused by: CLASS: CLASS: MESSAGE" for {@code savepoint}, {@code
 *       stop}, {@code savepoint -d} and {@code checkpoint}.
 * </ul>
 *
 * Prints one "ok"/"not ok" line per case and a final "N passed, M failed"; exits 1 on failure.
 * Run from the repository root with Flink's jars on the class path.
 */
public final class SerializedThrowableSelfTest extends Harness {

    /** jobstore's serialVersionUID of the original class (ORIGINAL_SERIAL_VERSION_UID). */
    static final long ORIGINAL_SERIAL_VERSION_UID = 1L;

    static final String JOB_ID = "0123456789abcdef0123456789abcdef";
    static final String TRIGGER_ID = "fedcba9876543210fedcba9876543210";

    /** Stands for the original class (which no JVM has) when reading and writing it. */
    static final class StandIn extends Exception {
        private static final long serialVersionUID = ORIGINAL_SERIAL_VERSION_UID;

        StandIn(String message) {
            super(message);
            setStackTrace(new StackTraceElement[0]);
        }
    }

    /** One fixture file. */
    static final class Fixture {
        final String name;
        final String cls;
        final String message;
        final String stackTrace;
        final String base64;

        Fixture(Path file, JsonNode json) {
            this.name = file.getFileName().toString();
            this.cls = text(json, "class");
            this.message = text(json, "message");
            this.stackTrace = text(json, "stack-trace");
            this.base64 = text(json, "serialized-throwable");
        }

        byte[] bytes() {
            return Base64.getDecoder().decode(base64);
        }

        /** What toString() of Flink's SerializedThrowable gives: CLASS: CLASS: MESSAGE. */
        String shown() {
            return cls + ": " + cls + ": " + message;
        }

        /** The failure-cause jobstore answers: Flink's shape, with serialized-throwable. */
        ObjectNode failureCause() {
            ObjectNode cause = MAPPER.createObjectNode();
            cause.put("class", cls);
            cause.put("stack-trace", stackTrace);
            cause.put("serialized-throwable", base64);
            return cause;
        }
    }

    static final ObjectMapper MAPPER = new ObjectMapper();

    /** One line, shortened: the fixtures' messages run past 65535 bytes. */
    @Override
    void printFailure(String name, Throwable t) {
        System.out.println("not ok - " + name + ": " + shorten(String.valueOf(t)));
    }

    static String text(JsonNode json, String field) {
        JsonNode value = json.get(field);
        if (value == null || !value.isTextual()) {
            throw new IllegalArgumentException("the fixture has no text field " + field);
        }
        return value.asText();
    }

    static String shorten(String s) {
        String one = s.replace("\n", "\\n").replace("\0", "\\0");
        return one.length() <= 300 ? one : one.substring(0, 300) + "...(" + one.length() + " chars)";
    }

    /** {@link Harness#checkEq} with the values shortened. */
    static void checkEq(Object expected, Object actual, String what) {
        if (expected == null ? actual != null : !expected.equals(actual)) {
            throw new AssertionError(
                    what + ": expected <" + shorten(String.valueOf(expected)) + "> but was <"
                            + shorten(String.valueOf(actual)) + ">");
        }
    }

    /** The length of a string in Java's modified UTF-8 (what decides short or long strings). */
    static long modifiedUtf8Length(String s) {
        long n = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            n += (c >= 1 && c <= 0x7F) ? 1 : (c <= 0x7FF ? 2 : 3);
        }
        return n;
    }

    /** Reads one object and checks that the stream holds nothing after it. */
    static Object readWhole(ObjectInputStream in, InputStream raw) throws Exception {
        Object o = in.readObject();
        check(in.read() == -1 && raw.read() == -1, "bytes left after the object");
        return o;
    }

    /** A stream in which the class CLASS (serialVersionUID 1, no fields) is read as StandIn. */
    static ObjectInputStream renamingInput(InputStream in, String cls) throws IOException {
        return new ObjectInputStream(in) {
            @Override
            protected ObjectStreamClass readClassDescriptor() throws IOException, ClassNotFoundException {
                ObjectStreamClass desc = super.readClassDescriptor();
                boolean original = desc.getName().equals(cls)
                        && desc.getSerialVersionUID() == ORIGINAL_SERIAL_VERSION_UID
                        && desc.getFields().length == 0;
                return original ? ObjectStreamClass.lookup(StandIn.class) : desc;
            }
        };
    }

    /** A stream writing StandIn under the name CLASS: Java's bytes for an exception of that class. */
    static ObjectOutputStream renamingOutput(OutputStream out, String cls) throws IOException {
        return new ObjectOutputStream(out) {
            @Override
            protected void writeClassDescriptor(ObjectStreamClass desc) throws IOException {
                if (desc.forClass() != StandIn.class) {
                    super.writeClassDescriptor(desc);
                    return;
                }
                // What ObjectStreamClass.writeNonProxy writes for a class without fields, renamed.
                writeUTF(cls);
                writeLong(ORIGINAL_SERIAL_VERSION_UID);
                writeByte(ObjectStreamConstants.SC_SERIALIZABLE);
                writeShort(0);
            }
        };
    }

    void fixtureCases(Fixture f) {
        String n = f.name + ": ";
        test(n + "Flink's InstantiationUtil decodes a SerializedThrowable, every byte read", () -> {
            Object o = InstantiationUtil.deserializeObject(f.bytes(), ClassLoader.getSystemClassLoader());
            check(o instanceof SerializedThrowable, "decoded a " + o.getClass().getName());
            ByteArrayInputStream raw = new ByteArrayInputStream(f.bytes());
            Object again = readWhole(new ObjectInputStream(raw), raw);
            check(again instanceof SerializedThrowable, "decoded a " + again.getClass().getName());
        });
        test(n + "class, message, toString and stack trace are those Flink's constructor gives", () -> {
            SerializedThrowable t = decode(f);
            checkEq(f.cls, t.getOriginalErrorClassName(), "getOriginalErrorClassName()");
            checkEq(f.cls + ": " + f.message, t.getMessage(), "getMessage()");
            checkEq(f.shown(), t.toString(), "toString()");
            checkEq(f.stackTrace, t.getFullStringifiedStackTrace(), "getFullStringifiedStackTrace()");
            checkEq(f.stackTrace, ExceptionUtils.stringifyException(t), "stringifyException()");
            StringWriter printed = new StringWriter();
            t.printStackTrace(new PrintWriter(printed));
            checkEq(f.stackTrace, printed.toString(), "printStackTrace()");
            checkEq(null, t.getCause(), "getCause()");
            checkEq(0, t.getStackTrace().length, "getStackTrace().length");
            checkEq(0, t.getSuppressed().length, "getSuppressed().length");
        });
        test(n + "deserializeError falls back to the SerializedThrowable itself", () -> {
            SerializedThrowable t = decode(f);
            check(t.deserializeError(ClassLoader.getSystemClassLoader()) == t, "deserializeError()");
            check(SerializedThrowable.get(t, ClassLoader.getSystemClassLoader()) == t, "get()");
            try {
                InstantiationUtil.deserializeObject(t.getSerializedException(), ClassLoader.getSystemClassLoader());
                throw new AssertionError("the original class was found");
            } catch (ClassNotFoundException | java.io.InvalidClassException expected) {
                check(expected.getMessage().contains(f.cls), "the error names the class: " + expected);
            }
        });
        test(n + "Java writes the decoded SerializedThrowable back to the same bytes", () -> {
            byte[] again = InstantiationUtil.serializeObject(decode(f));
            check(Arrays.equals(f.bytes(), again), "differs: " + f.bytes().length + " bytes, Java's " + again.length);
        });
        test(n + "serializedException is Java's own encoding of the original exception", () -> {
            byte[] inner = decode(f).getSerializedException();
            ByteArrayInputStream raw = new ByteArrayInputStream(inner);
            Object o = readWhole(renamingInput(raw, f.cls), raw);
            check(o instanceof StandIn, "read a " + o.getClass().getName());
            StandIn original = (StandIn) o;
            checkEq(f.message, original.getMessage(), "the original's message");
            checkEq(null, original.getCause(), "the original's cause");
            checkEq(0, original.getStackTrace().length, "the original's stack trace");
            ByteArrayOutputStream javas = new ByteArrayOutputStream();
            try (ObjectOutputStream out = renamingOutput(javas, f.cls)) {
                out.writeObject(new StandIn(f.message));
            }
            check(Arrays.equals(javas.toByteArray(), inner),
                    "differs from Java's: " + inner.length + " bytes, Java's " + javas.size());
        });
        test(n + "Flink's REST mapper reads the failure-cause of a savepoint status answer", () -> {
            ObjectNode answer = MAPPER.createObjectNode();
            answer.putObject("status").put("id", "COMPLETED");
            answer.putObject("operation").set("failure-cause", f.failureCause());
            ObjectMapper rest = RestMapperUtils.getStrictObjectMapper();
            JavaType type = rest.getTypeFactory()
                    .constructParametricType(AsynchronousOperationResult.class, SavepointInfo.class);
            AsynchronousOperationResult<SavepointInfo> result =
                    rest.readValue(MAPPER.writeValueAsString(answer), type);
            SerializedThrowable cause = result.resource().getFailureCause();
            check(cause != null, "no failure cause");
            checkEq(f.shown(), cause.toString(), "toString()");
        });
    }

    static SerializedThrowable decode(Fixture f) throws Exception {
        return InstantiationUtil.deserializeObject(f.bytes(), ClassLoader.getSystemClassLoader());
    }

    /** A tiny REST server answering every operation like jobstore does with a failure-cause. */
    static final class FakeOperations implements AutoCloseable {
        private static final Pattern TRIGGER =
                Pattern.compile("(/v1)?/jobs/[0-9a-f]{32}/(savepoints|stop|checkpoints)|(/v1)?/savepoint-disposal");
        private static final Pattern STATUS = Pattern.compile(
                "(/v1)?/jobs/[0-9a-f]{32}/(savepoints|checkpoints)/" + TRIGGER_ID + "|(/v1)?/savepoint-disposal/"
                        + TRIGGER_ID);

        final HttpServer server;
        final List<String> requests = Collections.synchronizedList(new ArrayList<>());
        volatile ObjectNode cause;

        FakeOperations() throws IOException {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
            server.createContext("/", this::handle);
            server.start();
        }

        String address() {
            return "127.0.0.1:" + server.getAddress().getPort();
        }

        private void handle(HttpExchange ex) throws IOException {
            String method = ex.getRequestMethod();
            String path = ex.getRequestURI().getPath();
            ex.getRequestBody().readAllBytes();
            requests.add(method + " " + path);
            ObjectNode body = MAPPER.createObjectNode();
            int code;
            if (method.equals("POST") && TRIGGER.matcher(path).matches()) {
                code = path.contains("savepoint-disposal") ? 200 : 202;
                body.put("request-id", TRIGGER_ID);
            } else if (method.equals("GET") && STATUS.matcher(path).matches()) {
                code = 200;
                body.putObject("status").put("id", "COMPLETED");
                // Flink's checkpoint status says failureCause, the others failure-cause.
                body.putObject("operation")
                        .set(path.contains("/checkpoints/") ? "failureCause" : "failure-cause", cause);
            } else {
                code = 404;
                body.putArray("errors").add("Not found: " + path);
            }
            byte[] bytes = MAPPER.writeValueAsBytes(body);
            ex.getResponseHeaders().set("Content-Type", "application/json; charset=UTF-8");
            ex.sendResponseHeaders(code, bytes.length);
            try (OutputStream out = ex.getResponseBody()) {
                out.write(bytes);
            }
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }

    /** Runs Flink's command-line client in this process; its exit code and everything it printed. */
    static String runCli(Path configDir, String... args) throws Exception {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        PrintStream capture = new PrintStream(printed, true, "UTF-8");
        int rc;
        System.setOut(capture);
        System.setErr(capture);
        try {
            Configuration conf = new Configuration();
            CliFrontend cli = new CliFrontend(conf, CliFrontend.loadCustomCommandLines(conf, configDir.toString()));
            rc = cli.parseAndRun(args);
        } finally {
            System.setOut(out);
            System.setErr(err);
        }
        return "exit " + rc + "\n" + printed.toString("UTF-8");
    }

    void cliCases(List<Fixture> fixtures) throws Exception {
        // The client's log would repeat each failure (with the fixtures' NUL characters) on
        // the console; what it prints to stdout and stderr is captured and checked instead.
        Configurator.setLevel(CliFrontend.class.getName(), Level.OFF);
        Path configDir = Files.createTempDirectory("jobstore-throwable-conf");
        try (FakeOperations fake = new FakeOperations()) {
            String[][] commands = {
                {"savepoint", "-m", fake.address(), JOB_ID},
                {"stop", "-m", fake.address(), "--savepointPath", "file:///tmp/jobstore-savepoints", JOB_ID},
                {"savepoint", "-m", fake.address(), "-d", "file:///tmp/jobstore-savepoints/savepoint-1"},
                {"checkpoint", "-m", fake.address(), JOB_ID},
            };
            for (Fixture f : fixtures) {
                for (String[] command : commands) {
                    String what = String.join(" ", command).replace(fake.address(), "HOST:PORT");
                    test(f.name + ": flink " + what + " prints \"Caused by: CLASS: CLASS: MESSAGE\"", () -> {
                        fake.cause = f.failureCause();
                        fake.requests.clear();
                        String printed = runCli(configDir, command);
                        List<String> unknown = fake.requests.stream()
                                .filter(r -> !TRIGGER_OR_STATUS.matcher(r).matches())
                                .collect(Collectors.toList());
                        check(unknown.isEmpty(), "requests the fake does not answer: " + unknown);
                        check(printed.startsWith("exit 1\n"), "the client did not fail: " + shorten(printed));
                        check(printed.contains("Caused by: " + f.shown() + "\n"),
                                "the client printed: " + shorten(printed));
                    });
                }
            }
        } finally {
            Files.deleteIfExists(configDir);
        }
    }

    static final Pattern TRIGGER_OR_STATUS = Pattern.compile(
            "(POST|GET) (/v1)?/(jobs/[0-9a-f]{32}/(savepoints|stop|checkpoints)|savepoint-disposal)(/"
                    + TRIGGER_ID + ")?");

    private static Path fixtures() {
        for (Path d = Paths.get("").toAbsolutePath(); d != null; d = d.getParent()) {
            Path candidate = d.resolve("tests/data/serialized-throwable");
            if (Files.isDirectory(candidate)) {
                return candidate;
            }
        }
        return Paths.get("tests/data/serialized-throwable");
    }

    public static void main(String[] args) throws Exception {
        // A folder as the first argument, else the repository's fixtures, found upwards from
        // the working directory (the harness passes its own --fake/--url arguments).
        Path dir = args.length > 0 && !args[0].startsWith("--") ? Paths.get(args[0]) : fixtures();
        SerializedThrowableSelfTest t = new SerializedThrowableSelfTest();
        List<Fixture> fixtures = new ArrayList<>();
        t.test("the fixtures of " + dir + " are read, among them a message beyond 65535 bytes", () -> {
            try (Stream<Path> files = Files.list(dir)) {
                for (Path file : files.filter(p -> p.toString().endsWith(".json")).sorted()
                        .collect(Collectors.toList())) {
                    fixtures.add(new Fixture(file, MAPPER.readTree(file.toFile())));
                }
            }
            check(fixtures.size() >= 3, "fixtures: " + fixtures.size());
            check(fixtures.stream().anyMatch(f -> modifiedUtf8Length(f.message) > 65535), "no long message");
            check(fixtures.stream().anyMatch(f -> !f.message.chars().allMatch(c -> c < 0x80)),
                    "no non-ASCII message");
        });
        for (Fixture f : fixtures) {
            t.fixtureCases(f);
        }
        t.test("a failure-cause without serialized-throwable (jobstore's old shape) does not decode", () -> {
            String answer = "{\"status\":{\"id\":\"COMPLETED\"},\"operation\":{\"failure-cause\":"
                    + "{\"class\":\"jobstore.X\",\"stack-trace\":\"jobstore.X: m\"}}}";
            ObjectMapper rest = RestMapperUtils.getStrictObjectMapper();
            JavaType type = rest.getTypeFactory()
                    .constructParametricType(AsynchronousOperationResult.class, SavepointInfo.class);
            try {
                rest.readValue(answer, type);
                throw new AssertionError("it decoded");
            } catch (IOException | NullPointerException expected) {
                // what Flink's client meets today
            }
        });
        t.cliCases(fixtures);
        t.exit();
    }
}
