/**
 * Writes audit rows to ClickHouse through `@clickhouse/client`: one JSONEachRow INSERT per batch of
 * already-serialised rows (the same bytes a spill frame holds), with `insert_deduplication_token`
 * only when the server has it (22.2+; Debian's 18.16 does not — it answers "Unknown setting").
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import {
  checkIdentifier,
  DEFAULT_AUDIT_TABLE,
  parseVersion,
  type ServerVersion,
  schemaStatements,
  supportsDedupToken,
} from './schema.js';

export interface ClickHouseAuditOptions {
  /** `http://host:8123` (HTTP interface). */
  url: string;
  user?: string;
  password?: string;
  /** Default `default`. */
  database?: string;
  /** Default `floe_audit_events`. */
  table?: string;
  /** Per-request timeout (ms). Default 10,000: a hung server turns into a spill, not a stall. */
  requestTimeoutMs?: number;
}

export class ClickHouseAuditSink {
  readonly database: string;
  readonly table: string;
  readonly url: string;
  private readonly client: ClickHouseClient;
  private version: ServerVersion | undefined;
  /** Bound to database `default`: version and CREATE DATABASE work before our database exists. */
  private readonly admin: ClickHouseClient;

  constructor(o: ClickHouseAuditOptions) {
    let u: URL;
    try {
      u = new URL(o.url);
    } catch {
      throw new Error(`ClickHouse URL must look like http://host:8123, got ${JSON.stringify(o.url)}`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new Error(`ClickHouse URL must be http:// or https://, got ${JSON.stringify(o.url)}`);
    this.url = o.url;
    this.database = checkIdentifier('database', o.database ?? 'default');
    this.table = checkIdentifier('table', o.table ?? DEFAULT_AUDIT_TABLE);
    const common = {
      url: o.url,
      username: o.user ?? 'default',
      password: o.password ?? '',
      request_timeout: o.requestTimeoutMs ?? 10_000,
      log: { level: ClickHouseLogLevel.OFF }, // failures are ours to report (spill, alarm), once
    };
    this.client = createClient({ ...common, database: this.database });
    this.admin = createClient({ ...common, database: 'default' });
  }

  /** `db`.`table` */
  get qualifiedTable(): string {
    return `\`${this.database}\`.\`${this.table}\``;
  }

  /** The server's version (asked once per connection lifetime; re-asked after `forgetVersion`). */
  async serverVersion(): Promise<ServerVersion> {
    if (!this.version) {
      const rs = await this.admin.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' });
      const rows = (await rs.json()) as { v: string }[];
      this.version = parseVersion(rows[0]?.v ?? '');
    }
    return this.version;
  }

  /** The server may have been replaced (upgrade while down): ask its version again next time. */
  forgetVersion(): void {
    this.version = undefined;
  }

  async ping(): Promise<boolean> {
    const r = await this.client.ping();
    return r.success;
  }

  /** Create the database and table if missing (`floe audit init`). Returns the statements run. */
  async init(): Promise<string[]> {
    const v = await this.serverVersion();
    const [createDb, createTable] = schemaStatements(this.database, this.table, v);
    await this.admin.command({ query: createDb! });
    await this.admin.command({ query: createTable! });
    return [createDb!, createTable!];
  }

  /**
   * Insert a batch of JSONEachRow text (`rows` lines). Rejects on any failure; the caller spills.
   * The dedup token is a hash of the bytes, so the same batch retried carries the same token.
   */
  async insertPayload(payload: Buffer | string, rows: number): Promise<void> {
    if (rows === 0) return;
    const v = await this.serverVersion();
    const settings: Record<string, string> = {};
    if (supportsDedupToken(v))
      settings.insert_deduplication_token = createHash('sha256').update(payload).digest('hex').slice(0, 40);
    const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
    // Raw JSONEachRow bytes through `exec` (the client's `insert` wants objects for JSON formats, and
    // the rows are already serialised: the same bytes as a spill frame).
    const r = await this.client.exec({
      query: `INSERT INTO ${this.qualifiedTable} FORMAT JSONEachRow`,
      values: Readable.from([body], { objectMode: false }),
      clickhouse_settings: settings,
    });
    // Drain the (empty) response so the socket goes back to the pool.
    for await (const _ of r.stream) {
    }
  }

  /** count(DISTINCT event_id): every event once, whether or not merges have run. */
  async countDistinct(where = '1'): Promise<bigint> {
    return await this.scalar(
      `SELECT count(DISTINCT event_id) AS n FROM ${this.qualifiedTable} WHERE ${where}`,
    );
  }

  /** count() FINAL: rows after ReplacingMergeTree's collapse. */
  async countFinal(where = '1'): Promise<bigint> {
    return await this.scalar(`SELECT count() AS n FROM ${this.qualifiedTable} FINAL WHERE ${where}`);
  }

  /** count() without FINAL: physical rows (duplicates included until merged). */
  async countRaw(where = '1'): Promise<bigint> {
    return await this.scalar(`SELECT count() AS n FROM ${this.qualifiedTable} WHERE ${where}`);
  }

  async query<T>(sql: string): Promise<T[]> {
    const rs = await this.client.query({ query: sql, format: 'JSONEachRow' });
    return (await rs.json()) as T[];
  }

  private async scalar(sql: string): Promise<bigint> {
    const rows = await this.query<{ n: string | number }>(sql);
    return BigInt(rows[0]?.n ?? 0);
  }

  async close(): Promise<void> {
    await this.client.close();
    await this.admin.close();
  }
}
