/**
 * Built-ins that code run per call, per packet or per value takes from here, read once when this module loads.
 *
 * Under Jest every module (sqltally's, the drivers', the user's) runs in a vm context, and each lookup of a global
 * such as `Math` or `Array` there goes through the context's interceptor, which V8 cannot cache: about 250 ns a
 * lookup on a 2-core machine, against a few for a binding of a module. A per-row `run()` read two (`Number.isFinite`
 * and `Math.trunc` for its row count), which was most of what counting added to it under Jest; counting the values
 * of a 30000-value `VALUES ?` read three per value. `bench/driver-jest.ts` measures the per-call cost under Jest,
 * and `src/shared/intrinsics.test.ts` keeps the per-call functions it lists free of global lookups.
 *
 * Each is the same function or object the global names in the context that loaded this module (Jest's, or Node's),
 * so `instanceof DateClass` answers as `instanceof Date` did for values made in that context.
 */
export const isArray = Array.isArray;
export const arraySlice = Array.prototype.slice;
export const objectKeys = Object.keys;
export const ownSymbols = Object.getOwnPropertySymbols;
export const objectEntries = Object.entries;
export const getPrototypeOf = Object.getPrototypeOf;
export const objectCreate = Object.create;
export const OBJECT_PROTOTYPE = Object.prototype;
export const hasOwn = Object.hasOwn;
export const objectIs = Object.is;
export const ownDescriptor = Object.getOwnPropertyDescriptor;
export const defineProperty = Object.defineProperty;
export const reflectGet = Reflect.get;
export const reflectSet = Reflect.set;
export const reflectApply = Reflect.apply;
export const toNumber = Number;
export const toText = String;
export const numberIsFinite = Number.isFinite;
export const numberIsInteger = Number.isInteger;
export const numberIsSafeInteger = Number.isSafeInteger;
export const mathTrunc = Math.trunc;
export const mathMax = Math.max;
export const mathMin = Math.min;
export const mathFloor = Math.floor;
export const mathRound = Math.round;
export const mathImul = Math.imul;
export const toBigInt = BigInt;
export const DateClass = Date;
export const ErrorClass = Error;
export const BufferClass = Buffer;
export const functionToString = Function.prototype.toString;
