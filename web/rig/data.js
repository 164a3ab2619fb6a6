// The catalog data beside the page: the index, and one file per device, fetched
// once each (same origin, relative to the page: no network beyond the site).

export class Data {
  constructor(base) {
    this.base = base;
    this.index = null;
    this.devices = {};
    this.pending = new Map();
  }

  async load() {
    this.index = await this.json('index.json');
    return this.index;
  }

  async json(rel) {
    const res = await fetch(new URL(rel, this.base));
    if (!res.ok) throw new Error(`could not load the catalog data (${rel}: HTTP ${res.status})`);
    return res.json();
  }

  hasDevice(id) {
    return this.index.devices.some(([d]) => d === id);
  }

  async device(id) {
    if (this.devices[id]) return this.devices[id];
    if (!this.hasDevice(id)) return null;
    if (!this.pending.has(id)) {
      this.pending.set(
        id,
        this.json(`gpu/${encodeURIComponent(id)}.json`).then((doc) => {
          this.devices[id] = doc;
          return doc;
        }),
      );
    }
    return this.pending.get(id);
  }

  async devicesFor(ids) {
    await Promise.all(ids.map((id) => this.device(id)));
    return this.devices;
  }
}
