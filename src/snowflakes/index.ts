export { memberFetch } from './member-fetch.js';
export {
  SnowflakeRefusedError,
  SnowflakeService,
  type SnowflakeServiceOptions,
} from './snowflake-service.js';
