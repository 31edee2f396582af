// A transactional producer of the Java client, driven line by line on stdin: logfork's way
// to run a scenario with the client of the release under test (KIP-890's transactions v2
// need a 4.0+ client). One request per line, fields separated by tabs:
//   init | begin | send TOPIC PARTITION KEY VALUE | flush | commit | abort | close
// One answer per line: "ok" (flush: "ok" then one field per send since the last flush, its
// offset or "E:" and the error), or "error" and the exception.
// Producer settings come as NAME=VALUE arguments. The protocol owns stdout; the client's
// own logging goes to stderr.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnShell {
    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        Properties props = new Properties();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            props.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        List<Future<RecordMetadata>> pending = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            try {
                switch (f[0]) {
                    case "init": producer.initTransactions(); out.println("ok"); break;
                    case "begin": producer.beginTransaction(); out.println("ok"); break;
                    case "send":
                        pending.add(producer.send(
                            new ProducerRecord<>(f[1], Integer.parseInt(f[2]), f[3], f[4])));
                        out.println("ok");
                        break;
                    case "flush":
                        producer.flush();
                        StringBuilder sb = new StringBuilder("ok");
                        for (Future<RecordMetadata> p : pending) {
                            sb.append('\t');
                            try {
                                sb.append(p.get().offset());
                            } catch (ExecutionException e) {
                                sb.append("E:").append(describe(e.getCause()));
                            }
                        }
                        pending.clear();
                        out.println(sb);
                        break;
                    case "commit": producer.commitTransaction(); out.println("ok"); break;
                    case "abort": producer.abortTransaction(); out.println("ok"); break;
                    case "close": out.println("ok"); System.exit(0); break;
                    default: out.println("error\tunknown request " + f[0]);
                }
            } catch (Exception e) {
                out.println("error\t" + describe(e));
            }
        }
        System.exit(0);
    }

    private static String describe(Throwable t) {
        return (t.getClass().getSimpleName() + ": " + t.getMessage()).replace('\t', ' ')
            .replace('\n', ' ');
    }
}
