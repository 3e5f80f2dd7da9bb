export { AuthStateMachine } from './auth-state-machine.js';
export { authError, decodeAuthCommand, encodeAuthCommand, isAuthCommand, parseAuthCommand } from './codec.js';
export { userAddCommand, userSetPasswordCommand } from './commands.js';
export {
  DEFAULT_SCRYPT,
  type HashOptions,
  hashPassword,
  PasswordPolicyError,
  scryptParamsProblem,
  verifyPassword,
} from './password.js';
export * from './types.js';
