import { SqltallyError, redactSecrets } from './errors';

describe('redactSecrets', () => {
  it.each([
    ['cannot reach mysql://app:hunter2@db:3306/x', 'cannot reach mysql://app:***@db:3306/x'],
    ['mysql://app:hun@ter2@db:3306/x', 'mysql://app:***@db:3306/x'],
    ['postgres://u@h/d?password=hunter2&x=1', 'postgres://u@h/d?password=***&x=1'],
    ['postgres://u@h/d?x=1&sslpassword=hunter2', 'postgres://u@h/d?x=1&sslpassword=***'],
    ['host=h user=u password=hunter2 dbname=d', 'host=h user=u password=*** dbname=d'],
    ["host=h password='hunter 2' dbname=d", 'host=h password=*** dbname=d'],
    ['PGPASSWORD=hunter2 psql', 'PGPASSWORD=*** psql'],
    ['?access_token=hunter2;pwd=hunter2', '?access_token=***;pwd=***'],
    ["CREATE USER 'root'@'%' IDENTIFIED BY 'hunter2';", "CREATE USER 'root'@'%' IDENTIFIED BY '***';"],
    ["ALTER ROLE app PASSWORD 'hun''ter2'", "ALTER ROLE app PASSWORD '***'"],
  ])('%s', (text, shown) => {
    expect(redactSecrets(text)).toBe(shown);
  });

  it('leaves words that merely end like a secret name alone', () => {
    expect(redactSecrets('bypass=1 compass=north')).toBe('bypass=1 compass=north');
  });

  it('keeps JSON text valid: a secret value ends at the closing quote', () => {
    const json = JSON.stringify({ origin: 'postgres://u@h/d?password=hunter2', next: 'a@b', statement: 'x token=', sql: "SET PASSWORD 'trunc", c3: "O'Brien", more: 'mysql://u:p@h' });
    const shown = redactSecrets(json);
    expect(shown).not.toContain('hunter2');
    expect(JSON.parse(shown)).toEqual({ origin: 'postgres://u@h/d?password=***', next: 'a@b', statement: 'x token=***', sql: "SET PASSWORD 'trunc", c3: "O'Brien", more: 'mysql://u:***@h' });
  });

  it('is what every SqltallyError message goes through', () => {
    const err = new SqltallyError('access denied at postgres://u@h/d?password=hunter2', { phase: 'connect', cause: new Error('password=hunter2 rejected') });
    expect(err.message).not.toContain('hunter2');
  });
});
