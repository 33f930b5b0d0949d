import type { Db } from './db.js';

/** One API key as stored: never its secret, only the secret's sha256. */
export interface ApiKeyRecord {
  keyId: string;
  name: string;
  scopes: string[];
  secretHash: string;
  createdMs: number;
}

/** API keys (`api_keys`): made, listed, revoked; the live ones read by every node. */
export interface ApiKeyStore {
  insert(key: Omit<ApiKeyRecord, 'createdMs'>): Promise<ApiKeyRecord>;
  /** The keys not revoked, oldest first. */
  live(): Promise<ApiKeyRecord[]>;
  /** Revokes a live key; false when there is none with this id. */
  revoke(keyId: string): Promise<boolean>;
  /** Whether any key was ever made, revoked ones included. */
  anyMade(): Promise<boolean>;
}

interface Row {
  key_id: string;
  name: string;
  scopes: string[];
  secret_hash: string;
  created_at: Date | string;
}

function record(row: Row): ApiKeyRecord {
  return {
    keyId: row.key_id,
    name: row.name,
    scopes: row.scopes,
    secretHash: row.secret_hash,
    createdMs: new Date(row.created_at).getTime(),
  };
}

/** The one implementation, on Postgres and on PGlite alike. */
export class SqlApiKeyStore implements ApiKeyStore {
  constructor(private readonly db: Db) {}

  async insert(key: Omit<ApiKeyRecord, 'createdMs'>): Promise<ApiKeyRecord> {
    const { rows } = await this.db.query<Row>(
      `INSERT INTO api_keys (key_id, name, scopes, secret_hash) VALUES ($1, $2, $3, $4)
       RETURNING key_id, name, scopes, secret_hash, created_at`,
      [key.keyId, key.name, key.scopes, key.secretHash],
    );
    return record(rows[0] as Row);
  }

  async live(): Promise<ApiKeyRecord[]> {
    const { rows } = await this.db.query<Row>(
      `SELECT key_id, name, scopes, secret_hash, created_at FROM api_keys
       WHERE revoked_at IS NULL ORDER BY created_at, key_id`,
      [],
      'api_keys_live',
    );
    return rows.map(record);
  }

  async anyMade(): Promise<boolean> {
    const { rows } = await this.db.query<{ made: boolean }>('SELECT EXISTS (SELECT 1 FROM api_keys) AS made', []);
    return rows[0]?.made === true;
  }

  async revoke(keyId: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      'UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL',
      [keyId],
    );
    return rowCount > 0;
  }
}
