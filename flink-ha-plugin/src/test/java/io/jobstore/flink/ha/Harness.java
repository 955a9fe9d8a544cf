package io.jobstore.flink.ha;

import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/**
 * The plain-Java harness of the self-tests (no JUnit: the project builds without Maven): one
 * "ok - NAME" or "not ok - NAME: WHY" line per case, a final "N passed, M failed" line, exit status
 * 1 on a failure. tests/flink/flink.py reads these lines.
 */
abstract class Harness {

    private int passed;
    private int failed;

    interface Body {
        void run() throws Exception;
    }

    /** Runs one case and prints its line. */
    void test(String name, Body body) {
        try {
            body.run();
            passed++;
            System.out.println("ok - " + name);
        } catch (Throwable t) {
            failed++;
            printFailure(name, t);
        }
    }

    /** The "not ok" line of a failed case (and whatever else tells why). */
    void printFailure(String name, Throwable t) {
        System.out.println("not ok - " + name + ": " + t);
        t.printStackTrace(System.out);
    }

    /** Prints "N passed, M failed" and exits, with status 1 on a failure. */
    void exit() {
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    static void check(boolean condition, String message) {
        if (!condition) {
            throw new AssertionError(message);
        }
    }

    static void checkEq(Object expected, Object actual, String what) {
        if (expected == null ? actual != null : !expected.equals(actual)) {
            throw new AssertionError(what + ": expected <" + expected + "> but was <" + actual + ">");
        }
    }

    /** Runs {@code body} and returns the (unwrapped) exception it throws, or fails. */
    static Throwable thrown(Body body) {
        try {
            body.run();
        } catch (Throwable t) {
            Throwable c = t;
            while ((c instanceof ExecutionException || c instanceof CompletionException) && c.getCause() != null) {
                c = c.getCause();
            }
            return c;
        }
        throw new AssertionError("expected an exception, none was thrown");
    }

    static <T extends Throwable> T expect(Class<T> type, Body body) {
        Throwable t = thrown(body);
        if (!type.isInstance(t)) {
            throw new AssertionError("expected " + type.getSimpleName() + " but got " + t, t);
        }
        return type.cast(t);
    }
}
