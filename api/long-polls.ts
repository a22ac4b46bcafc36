/**
 * Places for long-polls (docs/phones.md, "Offers"): how many requests one key (a device, a person) may hold waiting
 * at once in this process. A request takes a place under each of its keys before it waits and gives them back when
 * it answers; with a key full it is refused with the seconds until that key's first wait ends. In memory, per API
 * process: with several API pods a key may hold each pod's allowance.
 */

interface Place {
  /** When the wait holding it ends at the latest (ms since the epoch). */
  until: number;
}

export interface LongPollKey {
  key: string;
  limit: number;
}

export type Taken = { taken: true; release: () => void } | { taken: false; full: LongPollKey; retryAfterSecs: number };

export class LongPollPlaces {
  private readonly held = new Map<string, Set<Place>>();

  /** Takes a place under every key, or none when one of them is full. */
  take(keys: readonly LongPollKey[], until: number, now: number): Taken {
    for (const wanted of keys) {
      const places = this.held.get(wanted.key);
      if (places !== undefined && places.size >= wanted.limit) {
        const first = Math.min(...[...places].map((place) => place.until));
        return { taken: false, full: wanted, retryAfterSecs: Math.max(1, Math.ceil((first - now) / 1000)) };
      }
    }
    const place: Place = { until };
    for (const { key } of keys) {
      const places = this.held.get(key) ?? new Set<Place>();
      places.add(place);
      this.held.set(key, places);
    }
    let released = false;
    return {
      taken: true,
      release: () => {
        if (released) return;
        released = true;
        for (const { key } of keys) {
          const places = this.held.get(key);
          places?.delete(place);
          if (places?.size === 0) this.held.delete(key);
        }
      },
    };
  }

  /** Keys with a place held (for tests and gauges). */
  get size(): number {
    return this.held.size;
  }
}
