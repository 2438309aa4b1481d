import { installedReleases, releaseVersion } from './releases';

describe('driver releases', () => {
  it('lists the pinned driver first, then the aliased releases installed here', () => {
    expect(installedReleases('mariadb')[0]).toBe('mariadb');
    expect(installedReleases('pg')).toEqual(['pg']);
  });

  it('reads the version an alias really installs, not the pinned one', () => {
    const [main, ...extra] = installedReleases('mariadb');
    expect(releaseVersion(main!)).toMatch(/^3\.5\./);
    for (const pkg of extra) expect(releaseVersion(pkg)).not.toBe(releaseVersion(main!));
  });

  it('says null for a package that is not installed', () => {
    expect(releaseVersion('no-such-driver-package')).toBeNull();
  });
});
