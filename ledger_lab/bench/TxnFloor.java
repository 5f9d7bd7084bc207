// The same transaction as ``python -m ledger_lab.bench.submit_txn`` makes, through the Java
// client, which speaks transactions version 2 (KIP-890) where the broker finalized it (Kafka
// 4.x: no AddPartitionsToTxn, one ProduceRequest for all of a broker's partitions) -- the
// protocol's floor on this broker, for comparison with librdkafka (no KIP-890 yet). Run with
// the local Kafka's own jars (Java 17 runs a source file directly):
//
//   java -cp "$HOME/.cache/ledger-stream/jars/kafka-4.1.1/libs/*" \
//       ledger_lab/bench/TxnFloor.java BOOTSTRAP ROUNDS TOPICS [PAUSE_MS]
//
// Prints the broker's finalized features, then p50/p90 in ms of each step and of
// produce-to-readable (a read-committed reader, fetch.max.wait.ms 50). The first rounds warm
// the JIT: use 150 or more.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class TxnFloor {
    public static void main(String[] a) throws Exception {
        String b = a[0]; int rounds = Integer.parseInt(a[1]); int topics = Integer.parseInt(a[2]);
        String run = UUID.randomUUID().toString().substring(0, 8);
        List<String> names = new ArrayList<>();
        for (int i = 0; i < topics; i++) names.add("java-txn-" + run + "-" + i);
        Properties ap = new Properties(); ap.put("bootstrap.servers", b);
        try (Admin admin = Admin.create(ap)) {
            List<NewTopic> nt = new ArrayList<>();
            for (String n : names) nt.add(new NewTopic(n, 1, (short) 1));
            admin.createTopics(nt).all().get();
            FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
            System.out.println("finalized features: " + f.finalizedFeatures());
        }
        Properties mp = new Properties(); mp.put("bootstrap.servers", b); mp.put("group.id", "jg-" + run);
        mp.put("enable.auto.commit", "false");
        KafkaConsumer<byte[], byte[]> member = new KafkaConsumer<>(mp, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        member.subscribe(List.of(names.get(0)));
        while (member.assignment().isEmpty()) member.poll(Duration.ofMillis(100));
        Properties pp = new Properties(); pp.put("bootstrap.servers", b); pp.put("acks", "all");
        pp.put("enable.idempotence", "true"); pp.put("linger.ms", "0"); pp.put("transactional.id", "jt-" + run);
        KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer());
        p.initTransactions();
        Properties rp = new Properties(); rp.put("bootstrap.servers", b); rp.put("group.id", "jr-" + run);
        rp.put("isolation.level", "read_committed"); rp.put("fetch.max.wait.ms", "50");
        KafkaConsumer<byte[], byte[]> r = new KafkaConsumer<>(rp, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        r.assign(List.of(new TopicPartition(names.get(0), 0)));
        Map<String, Long> seen = Collections.synchronizedMap(new HashMap<>());
        Thread t = new Thread(() -> { while (true) { for (ConsumerRecord<byte[], byte[]> x : r.poll(Duration.ofMillis(50))) seen.putIfAbsent(new String(x.value()), System.nanoTime()); } });
        t.setDaemon(true); t.start();
        Thread.sleep(2000);
        List<Double> flush = new ArrayList<>(), offs = new ArrayList<>(), commit = new ArrayList<>(), total = new ArrayList<>(), readable = new ArrayList<>();
        for (int i = 0; i < rounds; i++) {
            String v = "v" + i + "-" + run;
            long t0 = System.nanoTime();
            p.beginTransaction();
            for (String n : names) p.send(new ProducerRecord<>(n, 0, "k".getBytes(), v.getBytes()));
            p.flush(); long t1 = System.nanoTime();
            p.sendOffsetsToTransaction(Map.of(new TopicPartition(names.get(0), 0), new OffsetAndMetadata(i + 1)), member.groupMetadata());
            long t2 = System.nanoTime();
            p.commitTransaction(); long t3 = System.nanoTime();
            while (!seen.containsKey(v)) Thread.sleep(0, 200000);
            flush.add((t1 - t0) / 1e6); offs.add((t2 - t1) / 1e6); commit.add((t3 - t2) / 1e6); total.add((t3 - t0) / 1e6);
            readable.add((seen.get(v) - t0) / 1e6);
            Thread.sleep(Long.parseLong(a.length > 3 ? a[3] : "20"));
        }
        for (Object[] row : new Object[][]{{"java txn produce+flush", flush}, {"java txn send_offsets", offs}, {"java txn commit", commit}, {"java txn total", total}, {"java txn readable", readable}}) {
            @SuppressWarnings("unchecked") List<Double> l = new ArrayList<>((List<Double>) row[1]); Collections.sort(l);
            System.out.printf("%-30s p50 %6.2f  p90 %6.2f ms%n", row[0], l.get(l.size() / 2), l.get((int) (l.size() * 0.9)));
        }
        System.exit(0);
    }
}
