// The client scenario of tests/clients/test_node_pg.py through node-postgres (`pg`).
//
// Usage: node scenario.js '<json>' with {host, port, database, user, password, ssl, minAge,
// slow: {host, port, database, user, password, query}}. Prints one JSON line per step; a step that
// fails unexpectedly prints {"step": ..., "error": ..., "sqlstate": ...} and the script goes on.
"use strict";

const { Client } = require("pg");

const options = JSON.parse(process.argv[2]);

function emit(record) {
  process.stdout.write(JSON.stringify(record) + "\n");
}

function clientConfig(target) {
  return {
    host: target.host,
    port: target.port,
    database: target.database,
    user: target.user,
    password: target.password,
    ssl: options.ssl ? { rejectUnauthorized: false } : false,
    connectionTimeoutMillis: 10000,
  };
}

async function step(name, action) {
  try {
    emit({ step: name, ...(await action()) });
  } catch (error) {
    emit({ step: name, error: String(error.message), sqlstate: error.code ?? null });
  }
}

async function cancelSlowQuery() {
  const config = clientConfig(options.slow);
  const client = new Client(config);
  await client.connect();
  const started = Date.now();
  let settled = false;
  const running = client.query(options.slow.query).finally(() => {
    settled = true;
  });
  // The first CancelRequest may arrive before the engine query starts: send one every 0.2 s.
  const sender = setInterval(() => {
    if (!settled && client.activeQuery) new Client(config).cancel(client, client.activeQuery);
  }, 200);
  let outcome;
  try {
    const result = await running;
    outcome = { sqlstate: null, rows: result.rows };
  } catch (error) {
    outcome = { sqlstate: error.code ?? null, message: String(error.message) };
  } finally {
    clearInterval(sender);
  }
  outcome.seconds = (Date.now() - started) / 1000;
  const after = await client.query("SELECT 1 AS one");
  outcome.after = Number(after.rows[0].one);
  await client.end();
  return outcome;
}

async function main() {
  const client = new Client(clientConfig(options));
  await step("connect", async () => {
    await client.connect();
    const stream = client.connection.stream;
    return {
      encrypted: Boolean(stream.encrypted),
      protocol: typeof stream.getProtocol === "function" ? stream.getProtocol() : null,
    };
  });
  await step("select1", async () => {
    const result = await client.query("SELECT 1 AS one");
    const value = result.rows[0].one;
    return { value: Number(value), js_type: typeof value, type_oid: result.fields[0].dataTypeID };
  });
  await step("set_epsilon", async () => {
    await client.query(`SET veil.epsilon = ${options.epsilon}`);
    return {};
  });
  await step("dp_count", async () => {
    const result = await client.query({
      text: "SELECT COUNT(*) AS n FROM patients WHERE age > $1",
      values: [options.minAge],
    });
    return { value: Number(result.rows[0].n), fields: result.fields.map((f) => f.name) };
  });
  await step("introspection", async () => {
    const result = await client.query(
      "SELECT column_name, data_type FROM information_schema.columns" +
        " WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position",
      ["visits"],
    );
    return { columns: result.rows.map((row) => [row.column_name, row.data_type]) };
  });
  await step("refused", async () => {
    await client.query("SELECT * FROM visits");
    return { sqlstate: null };
  });
  await step("after_refusal", async () => {
    const result = await client.query({
      text: "SELECT COUNT(*) AS n FROM patients WHERE age > $1",
      values: [options.minAge],
    });
    return { value: Number(result.rows[0].n) };
  });
  await step("cancel", cancelSlowQuery);
  await step("disconnect", async () => {
    await client.end();
    return {};
  });
}

main().then(
  () => emit({ step: "done" }),
  (error) => {
    emit({ step: "crashed", error: String(error.stack ?? error) });
    process.exitCode = 1;
  },
);
