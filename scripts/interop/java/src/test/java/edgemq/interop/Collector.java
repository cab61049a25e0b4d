package edgemq.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.apache.rocketmq.common.message.MessageExt;

/** Messages a consumer received, in arrival order, with the time each arrived. */
final class Collector {
    /** One delivery: the message, when it arrived (System.currentTimeMillis) and who got it. */
    record Delivery(MessageExt msg, long at, String consumer) {
    }

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition grew = lock.newCondition();
    private final List<Delivery> got = new ArrayList<>();

    void add(MessageExt m, String consumer) {
        lock.lock();
        try {
            got.add(new Delivery(m, System.currentTimeMillis(), consumer));
            grew.signalAll();
        } finally {
            lock.unlock();
        }
    }

    void addAll(List<MessageExt> ms, String consumer) {
        for (MessageExt m : ms) {
            add(m, consumer);
        }
    }

    List<Delivery> snapshot() {
        lock.lock();
        try {
            return new ArrayList<>(got);
        } finally {
            lock.unlock();
        }
    }

    int size() {
        lock.lock();
        try {
            return got.size();
        } finally {
            lock.unlock();
        }
    }

    /** Waits until at least N deliveries arrived; fails after TIMEOUT. Returns all of them. */
    List<Delivery> await(int n, Duration timeout) throws InterruptedException {
        long left = timeout.toNanos();
        lock.lock();
        try {
            while (got.size() < n) {
                if (left <= 0) {
                    throw new AssertionError("received " + got.size() + " of " + n + " messages in "
                            + timeout.toSeconds() + " s");
                }
                left = grew.awaitNanos(left);
            }
            return new ArrayList<>(got);
        } finally {
            lock.unlock();
        }
    }

    /** Waits QUIET for deliveries beyond the current ones, so a test can tell there were none. */
    List<Delivery> settle(Duration quiet) throws InterruptedException {
        lock.lock();
        try {
            long left = quiet.toNanos();
            while (left > 0) {
                left = grew.awaitNanos(left);
            }
            return new ArrayList<>(got);
        } finally {
            lock.unlock();
        }
    }

    static void sleep(Duration d) throws InterruptedException {
        TimeUnit.MILLISECONDS.sleep(d.toMillis());
    }
}
