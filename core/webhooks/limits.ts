/** Webhook endpoints an application may have (spec section 8): the API and the operator both hold to it. */
export const maxEndpointsPerApplication = 20;
