/** A JSON value: what an operation id stores and replays (G5). */
export type JsonValue =
  null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/**
 * `T` itself when it survives `JSON.stringify` → `JSON.parse` with its type intact (strings, finite numbers,
 * booleans, null, arrays and plain objects of them, undefined for "no result" or an absent property), else a
 * type `T` is not assignable to. Used as `(…) => Promise<T & JsonCompatible<T>>`, so interfaces pass as well as
 * type aliases, while `Date`, `bigint`, `Map` or functions are refused at compile time.
 */
export type JsonCompatible<T> = T extends string | number | boolean | null | undefined | void
  ? T
  : T extends bigint | symbol | ((...args: never[]) => unknown)
    ? never
    : T extends readonly unknown[]
      ? { [I in keyof T]: JsonCompatible<T[I]> }
      : T extends object
        ? { [K in keyof T]: JsonCompatible<T[K]> }
        : never;
