/**
 * Built-ins that code run per call, per packet or per value takes from here, read once at load: under Jest a global
 * lookup goes through the vm context's interceptor, which V8 cannot cache (bench/driver-jest.ts). Each is the object
 * the global names in the loading context, so `instanceof DateClass` answers as `instanceof Date` would there.
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
export const PromiseClass = Promise;
export const BufferClass = Buffer;
export const functionToString = Function.prototype.toString;
