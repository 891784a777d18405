// The client scenario of tests/clients/test_jdbc.py through pgjdbc.
//
// Usage: java -cp postgresql.jar:BUILD Scenario URL USER PASSWORD MIN_AGE EPSILON SLOW_URL SLOW_USER
// SLOW_PASSWORD SLOW_QUERY. Prints one JSON line per step; a step that fails unexpectedly prints
// {"step": ..., "error": ..., "sqlstate": ...} and the program goes on.

import java.lang.reflect.Field;
import java.net.Socket;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import javax.net.ssl.SSLSocket;

public final class Scenario {
  interface Step {
    String run() throws Exception;
  }

  static String quote(String value) {
    if (value == null) return "null";
    StringBuilder out = new StringBuilder("\"");
    for (char c : value.toCharArray()) {
      switch (c) {
        case '"': out.append("\\\""); break;
        case '\\': out.append("\\\\"); break;
        case '\n': out.append("\\n"); break;
        case '\r': out.append("\\r"); break;
        case '\t': out.append("\\t"); break;
        default:
          if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
          else out.append(c);
      }
    }
    return out.append('"').toString();
  }

  static String list(List<String> values) {
    List<String> quoted = new ArrayList<>();
    for (String value : values) quoted.add(value.startsWith("[") ? value : quote(value));
    return "[" + String.join(",", quoted) + "]";
  }

  static void step(String name, Step action) {
    String body;
    try {
      body = action.run();
    } catch (SQLException error) {
      body = "\"error\":" + quote(error.getMessage()) + ",\"sqlstate\":" + quote(error.getSQLState());
    } catch (Exception error) {
      body = "\"error\":" + quote(error.toString()) + ",\"sqlstate\":null";
    }
    String fields = body.isEmpty() ? "" : "," + body;
    System.out.println("{\"step\":" + quote(name) + fields + "}");
    System.out.flush();
  }

  static Connection open(String url, String user, String password) throws SQLException {
    Properties properties = new Properties();
    properties.setProperty("user", user);
    properties.setProperty("password", password);
    properties.setProperty("connectTimeout", "10");
    return DriverManager.getConnection(url, properties);
  }

  /** Whether the connection's socket is a TLS one (pgjdbc has no public API for it; null if unknown). */
  static Boolean encrypted(Connection connection) {
    try {
      Object executor = ((org.postgresql.core.BaseConnection) connection).getQueryExecutor();
      for (Class<?> type = executor.getClass(); type != null; type = type.getSuperclass()) {
        try {
          Field field = type.getDeclaredField("pgStream");
          field.setAccessible(true);
          Socket socket = ((org.postgresql.core.PGStream) field.get(executor)).getSocket();
          return socket instanceof SSLSocket;
        } catch (NoSuchFieldException missing) {
          // look in the superclass
        }
      }
    } catch (Exception error) {
      return null;
    }
    return null;
  }

  static long count(Connection connection, int minAge) throws SQLException {
    try (PreparedStatement statement =
        connection.prepareStatement("SELECT COUNT(*) FROM patients WHERE age > ?")) {
      statement.setInt(1, minAge);
      try (ResultSet rows = statement.executeQuery()) {
        rows.next();
        return rows.getLong(1);
      }
    }
  }

  static String cancelSlowQuery(String url, String user, String password, String query)
      throws Exception {
    try (Connection connection = open(url, user, password);
        Statement statement = connection.createStatement()) {
      long started = System.nanoTime();
      // The first CancelRequest may arrive before the engine query starts: send one every 0.2 s.
      Thread canceller =
          new Thread(
              () -> {
                try {
                  while (true) {
                    Thread.sleep(200);
                    statement.cancel();
                  }
                } catch (InterruptedException done) {
                  // the query ended
                } catch (SQLException error) {
                  System.err.println("cancel failed: " + error);
                }
              });
      canceller.start();
      String outcome;
      try (ResultSet rows = statement.executeQuery(query)) {
        rows.next();
        outcome = "\"sqlstate\":null,\"value\":" + rows.getLong(1);
      } catch (SQLException error) {
        outcome =
            "\"sqlstate\":" + quote(error.getSQLState()) + ",\"message\":" + quote(error.getMessage());
      } finally {
        canceller.interrupt();
        canceller.join();
      }
      double seconds = (System.nanoTime() - started) / 1e9;
      try (Statement after = connection.createStatement();
          ResultSet rows = after.executeQuery("SELECT 1")) {
        rows.next();
        return outcome + ",\"seconds\":" + seconds + ",\"after\":" + rows.getInt(1);
      }
    }
  }

  public static void main(String[] args) throws Exception {
    String url = args[0], user = args[1], password = args[2];
    int minAge = Integer.parseInt(args[3]);
    String epsilon = args[4];
    String slowUrl = args[5], slowUser = args[6], slowPassword = args[7], slowQuery = args[8];

    Connection[] connection = new Connection[1];
    step("connect", () -> {
      connection[0] = open(url, user, password);
      DatabaseMetaData meta = connection[0].getMetaData();
      return "\"encrypted\":" + encrypted(connection[0])
          + ",\"server_version\":" + quote(meta.getDatabaseProductVersion())
          + ",\"driver\":" + quote(meta.getDriverVersion());
    });
    if (connection[0] == null) {
      System.out.println("{\"step\":\"done\"}");
      return;
    }
    Connection conn = connection[0];
    step("select1", () -> {
      try (Statement statement = conn.createStatement();
          ResultSet rows = statement.executeQuery("SELECT 1")) {
        rows.next();
        return "\"value\":" + rows.getInt(1);
      }
    });
    step("set_epsilon", () -> {
      try (Statement statement = conn.createStatement()) {
        statement.execute("SET veil.epsilon = " + epsilon);
        return "";
      }
    });
    step("dp_count", () -> "\"value\":" + count(conn, minAge));
    step("tables", () -> {
      List<String> names = new ArrayList<>();
      try (ResultSet rows = conn.getMetaData().getTables(null, "public", "%", new String[] {"TABLE"})) {
        while (rows.next()) names.add(rows.getString("TABLE_NAME"));
      }
      return "\"tables\":" + list(names);
    });
    step("columns", () -> {
      List<String> columns = new ArrayList<>();
      try (ResultSet rows = conn.getMetaData().getColumns(null, "public", "visits", "%")) {
        while (rows.next()) {
          columns.add(list(List.of(
              rows.getString("COLUMN_NAME"), rows.getString("TYPE_NAME"),
              String.valueOf(rows.getString("REMARKS")))));
        }
      }
      return "\"columns\":" + list(columns);
    });
    step("refused", () -> {
      try (Statement statement = conn.createStatement();
          ResultSet rows = statement.executeQuery("SELECT * FROM visits")) {
        return "\"sqlstate\":null";
      }
    });
    step("after_refusal", () -> "\"value\":" + count(conn, minAge));
    step("fetch_size", () -> {
      // setFetchSize inside a transaction: pgjdbc reads the answer through a portal, two rows at a time
      conn.setAutoCommit(false);
      int rows = 0;
      try (Statement statement = conn.createStatement()) {
        statement.setFetchSize(2);
        try (ResultSet result = statement.executeQuery(
            "SELECT region, COUNT(*) FROM patients GROUP BY region")) {
          while (result.next()) rows++;
        }
      }
      conn.commit();
      conn.setAutoCommit(true);
      return "\"rows\":" + rows;
    });
    step("cancel", () -> cancelSlowQuery(slowUrl, slowUser, slowPassword, slowQuery));
    step("disconnect", () -> {
      conn.close();
      return "\"closed\":" + conn.isClosed();
    });
    System.out.println("{\"step\":\"done\"}");
  }
}
