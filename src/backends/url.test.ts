import { MARIADB } from './mariadb';
import { POSTGRES } from './postgres';
import { SqltallyError } from '../shared/errors';
import { parseExternalUrl, redactUrl } from './url';

const VAR = 'SQLTALLY_MARIADB_URL';

function parseError(raw: string, module = MARIADB): SqltallyError {
  try {
    parseExternalUrl(module, raw, VAR, module.name);
  } catch (err) {
    if (err instanceof SqltallyError) return err;
    throw err;
  }
  throw new Error(`expected ${raw} to be rejected`);
}

describe('parseExternalUrl', () => {
  it('reads user, decoded password, host, port and database', () => {
    expect(parseExternalUrl(MARIADB, 'mysql://app:p%40ss%3Aword@db.local:3307/bench', VAR, 'mariadb')).toEqual({
      kind: 'network',
      host: 'db.local',
      port: 3307,
      user: 'app',
      password: 'p@ss:word',
      database: 'bench',
    });
  });

  it('fills the default port, user and database', () => {
    expect(parseExternalUrl(POSTGRES, 'postgresql://127.0.0.1', 'SQLTALLY_POSTGRES_URL', 'postgres')).toEqual({
      kind: 'network',
      host: '127.0.0.1',
      port: 5432,
      user: 'postgres',
      password: '',
      database: 'sqltally',
    });
  });

  it('unbrackets IPv6 hosts', () => {
    expect(parseExternalUrl(MARIADB, 'mariadb://u@[::1]:3306/x', VAR, 'mariadb').host).toBe('::1');
  });

  it('rejects text that is not a URL, naming the variable and how to fix it', () => {
    const err = parseError('localhost:3306');
    expect(err.phase).toBe('config');
    expect(err.provider).toBe('external');
    expect(err.message).toContain(VAR);
    expect(err.message).toContain('what to do: set SQLTALLY_MARIADB_URL to mariadb://USER@HOST:3306/DATABASE (with a password: USER:PASSWORD@HOST)');
  });

  it('rejects a scheme of another backend', () => {
    expect(parseError('postgres://u:p@h/db').message).toContain('scheme "postgres" is not one of mariadb://, mysql://');
  });

  it('rejects an out-of-range port', () => {
    expect(parseError('mysql://u@h:0/db').message).toMatch(/bad port "0"|cannot parse/);
    expect(parseError('mysql://u@h:70000/db').message).toContain('cannot parse');
  });

  it('rejects a URL without host', () => {
    expect(parseError('mysql:///db').message).toContain('no host');
  });

  it('never shows the password of a rejected URL', () => {
    const err = parseError('mysql://app:hunter2@h:notaport/db');
    expect(err.message).not.toContain('hunter2');
    expect(err.message).toContain('app:***@');
  });
});

describe('redactUrl', () => {
  it('replaces the password and keeps the rest', () => {
    expect(redactUrl('postgres://bob:s3cret@10.0.0.1:5432/app')).toBe('postgres://bob:***@10.0.0.1:5432/app');
  });
  it('leaves a URL without password unchanged', () => {
    expect(redactUrl('mysql://root@127.0.0.1:3306/sqltally')).toBe('mysql://root@127.0.0.1:3306/sqltally');
  });
  it('still redacts text the URL parser rejects', () => {
    expect(redactUrl('mysql://u:topsecret@h:99999999/x')).not.toContain('topsecret');
  });
});

describe('redactUrl: secrets in query parameters and odd passwords', () => {
  it.each([
    ['postgres://u@127.0.0.1:5432/d?password=hunter2', 'postgres://u@127.0.0.1:5432/d?password=***'],
    ['postgres://u@h/d?sslmode=require&sslpassword=hunter2&application_name=x', 'postgres://u@h/d?sslmode=require&sslpassword=***&application_name=x'],
    ['mariadb://u@127.0.0.1:3306/d?PASSWORD=hunter2', 'mariadb://u@127.0.0.1:3306/d?PASSWORD=***'],
    ['mysql://u:hunter2@h/d?password=hunter2', 'mysql://u:***@h/d?password=***'],
  ])('%s', (raw, shown) => {
    expect(redactUrl(raw)).toBe(shown);
  });

  it.each([
    'mysql://u:hunter2@127.0.0.1:99999/d',
    'postgres://u:hun/ter2@h:abc/d',
    'postgres://u:hun#ter2@h/d',
    'mysql://u:hun@ter2@h:99999/d',
    'postgres://u@h:abc/d?password=hunter2',
  ])('hides the whole password of the unparseable %s', (raw) => {
    const shown = redactUrl(raw);
    expect(shown).not.toMatch(/hun|ter2/);
    expect(shown).toContain('***');
  });
});
