// The real Riak Java client (riak-client 2.1.1) against a Basalt node with
// security on (interop/run.sh's security stage): STARTTLS and AuthReq with
// a password through RiakNode.Builder.withAuth(user, password, trustStore),
// the trust store a KeyStore built here from the CA's PEM file (from
// `basalt certs ca`). Checks: store / fetch / delete as the good user;
// refused: a wrong password (user `wrong_java`), a user granted riak_kv.get
// only trying a store (`getonly`), a user whose only source is 10.0.0.0/8
// connecting from 127.0.0.1 (`faraway`); the good user served after them.
//
// BASALT_SECURE_PB_ADDR (host:port) and BASALT_SECURE_CA (the PEM file)
// are set by the stage after `basalt admin security` made the users (see
// security_stage in interop/run.sh). Prints PASS/FAIL per check and
// "N passed, M failed"; exit status 1 if any failed.
//
// The client asks for TLS 1.2 (its SSLEngine's enabled protocols), which
// the node serves with its ECDSA certificate.
package basalt.interop;

import com.basho.riak.client.api.RiakClient;
import com.basho.riak.client.api.commands.kv.DeleteValue;
import com.basho.riak.client.api.commands.kv.FetchValue;
import com.basho.riak.client.api.commands.kv.StoreValue;
import com.basho.riak.client.core.RiakCluster;
import com.basho.riak.client.core.RiakNode;
import com.basho.riak.client.core.query.Location;
import com.basho.riak.client.core.query.Namespace;
import com.basho.riak.client.core.query.RiakObject;
import com.basho.riak.client.core.util.BinaryValue;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.concurrent.TimeUnit;

public final class Security {
    static int passed = 0;
    static int failed = 0;
    static String host;
    static int port;
    static KeyStore trust;
    static final String RUN = Long.toString(System.nanoTime());

    static void check(String name, Main.Check c) {
        try {
            c.run();
            passed++;
            System.out.println("PASS " + name);
        } catch (Throwable t) {
            failed++;
            System.out.println("FAIL " + name + ": " + t);
        }
    }

    static void expect(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    /** A trust store holding the CA certificate of the PEM file. */
    static KeyStore trustStore(String pemFile) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        X509Certificate ca;
        try (InputStream in = Files.newInputStream(Paths.get(pemFile))) {
            ca = (X509Certificate) cf.generateCertificate(in);
        }
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        ks.setCertificateEntry("basalt-ca", ca);
        return ks;
    }

    /** A cluster of the one secured node, as `user`; no connection opened yet. */
    static RiakCluster cluster(String user, String password) throws Exception {
        RiakNode node = new RiakNode.Builder()
                .withRemoteAddress(host)
                .withRemotePort(port)
                .withMinConnections(0)
                .withConnectionTimeout(5000)
                .withAuth(user, password, trust)
                .build();
        RiakCluster c = new RiakCluster.Builder(node).withExecutionAttempts(1).build();
        c.start();
        return c;
    }

    static Location loc(String key) {
        return new Location(new Namespace("secure_java" + RUN), key);
    }

    static RiakObject text(String v) {
        return new RiakObject().setContentType("text/plain").setValue(BinaryValue.create(v));
    }

    /** A fetch as `user` must fail within 10 s; its failure's text. */
    static String refused(String user, String password) throws Exception {
        RiakCluster c = cluster(user, password);
        try {
            RiakClient client = new RiakClient(c);
            try {
                client.executeAsync(new FetchValue.Builder(loc("k")).build()).get(10, TimeUnit.SECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                return "timed out (no connection could be opened)";
            } catch (Exception e) {
                return String.valueOf(e);
            }
            throw new AssertionError("a fetch as " + user + " succeeded");
        } finally {
            c.shutdown().get(10, TimeUnit.SECONDS);
        }
    }

    public static void main(String[] args) throws Exception {
        String addr = System.getenv("BASALT_SECURE_PB_ADDR");
        String ca = System.getenv("BASALT_SECURE_CA");
        if (addr == null || addr.isEmpty() || ca == null || ca.isEmpty()) {
            System.out.println("BASALT_SECURE_PB_ADDR / BASALT_SECURE_CA not set: nothing to run (interop/run.sh's security stage sets them)");
            return;
        }
        String[] hp = addr.split(":");
        host = hp[0];
        port = Integer.parseInt(hp[1]);
        trust = trustStore(ca);

        check("TLS + password: store, fetch, delete", () -> {
            RiakCluster c = cluster("interop", "interop-pw");
            try {
                RiakClient client = new RiakClient(c);
                client.execute(new StoreValue.Builder(text("v1")).withLocation(loc("k")).build());
                FetchValue.Response r = client.execute(new FetchValue.Builder(loc("k")).build());
                expect(!r.isNotFound(), "stored value not found");
                String got = r.getValue(RiakObject.class).getValue().toString();
                expect(got.equals("v1"), "fetched " + got);
                client.execute(new DeleteValue.Builder(loc("k")).build());
                expect(client.execute(new FetchValue.Builder(loc("k")).build()).isNotFound(), "deleted");
            } finally {
                c.shutdown().get(10, TimeUnit.SECONDS);
            }
        });
        check("a wrong password is refused", () -> {
            String why = refused("wrong_java", "not-the-password");
            System.out.println("  (" + why + ")");
        });
        check("a user without a source for 127.0.0.1 is refused", () -> {
            String why = refused("faraway", "faraway-pw");
            System.out.println("  (" + why + ")");
        });
        check("a user granted riak_kv.get only: fetch runs, store refused", () -> {
            RiakCluster c = cluster("getonly", "getonly-pw");
            try {
                RiakClient client = new RiakClient(c);
                expect(client.execute(new FetchValue.Builder(loc("none")).build()).isNotFound(), "not found");
                try {
                    client.execute(new StoreValue.Builder(text("v")).withLocation(loc("getonly")).build());
                    throw new AssertionError("a store without riak_kv.put succeeded");
                } catch (java.util.concurrent.ExecutionException e) {
                    String m = String.valueOf(e.getCause());
                    expect(m.contains("Permission denied") && m.contains("riak_kv.put"), "refusal: " + m);
                }
            } finally {
                c.shutdown().get(10, TimeUnit.SECONDS);
            }
        });
        check("the good user is served after the refusals", () -> {
            RiakCluster c = cluster("interop", "interop-pw");
            try {
                RiakClient client = new RiakClient(c);
                client.execute(new StoreValue.Builder(text("still")).withLocation(loc("after")).build());
                String got = client.execute(new FetchValue.Builder(loc("after")).build())
                        .getValue(RiakObject.class).getValue().toString();
                expect(got.equals("still"), "fetched " + got);
            } finally {
                c.shutdown().get(10, TimeUnit.SECONDS);
            }
        });
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
