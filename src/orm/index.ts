export { ready, SequenceNotReadyError, sequenceDefault, snowflakeDefault } from './defaults.js';
